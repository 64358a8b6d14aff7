#!/usr/bin/env bash
# Secrets as a person meets them (docs/security.md "Secrets"): `meith secret set` in a tmux pane
# asks for the value with echo off, twice; a mistyped second entry saves nothing; a source's
# env gets the value (a one-shot tool shows its tail), and what it echoes of it whole comes
# back "[REDACTED]". The value never shows on the screen.
#   secret_tmux_test.sh BIN_DIR
set -euo pipefail
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" secret secret
# A command that fails under `set -e` says which (a failure before any pane check says nothing).
trap 'echo "FAIL: line $LINENO: \`$BASH_COMMAND\` exited $?"; cat "$home/meithd.log" 2>/dev/null' ERR

keys=$(mktemp -d /tmp/meith-secret-keys.XXXXXX)
tools=$(mktemp -d /tmp/meith-secret-tools.XXXXXX)
trap 'rm -rf "$keys" "$tools"; tmux_cleanup' EXIT
export MEITH_SECRETS_KEY="$keys/secrets.key"
export MEITH_SECRET_SERVICE=off # meith's own store, whatever desktop runs
cat >"$tools/show.sh" <<'SH'
read -r _
printf '{"result":{"token":"%s","tail":"%s"}}' "$API_TOKEN" "${API_TOKEN#tok-}"
SH
cat >"$home/meithd.toml" <<TOML
[[sources]]
name = "tok"
kind = "exec"
command = ["sh", "$tools/show.sh"]
env = { API_TOKEN = "\${secret:API_TOKEN}" }
tool = { name = "show_token", description = "prints its token", capabilities = ["read-only"] }
TOML
start_daemon --socket "$home/d.sock"
meith=("$bin/meith" --home "$home")

session() {
  TERM=xterm t new-session -d -s secret -x 160 -y 30 \
    "MEITH_SECRET_SERVICE=off MEITH_SECRETS_KEY=$MEITH_SECRETS_KEY $bin/meith --home $home secret set API_TOKEN; echo set-exited-\$?; sleep 30"
}

# Two different entries: nothing saved.
session
wait_pane "Value of secret API_TOKEN (not shown):"
t send-keys -t secret "tok-typed-0123456789" Enter
wait_pane "The same again:"
t send-keys -t secret "tok-typed-0123456780" Enter
wait_pane "set-exited-2"
wait_pane "the two values differ: nothing saved"
[[ $(pane) != *"tok-typed"* ]] || fail "the typed value was echoed"
[[ ! -e "$home/secrets.enc" ]] || fail "a mismatch saved a store"

# The same twice: saved, never shown.
t kill-session -t secret
session
wait_pane "Value of secret API_TOKEN (not shown):"
t send-keys -t secret "tok-typed-0123456789" Enter
wait_pane "The same again:"
t send-keys -t secret "tok-typed-0123456789" Enter
wait_pane "set-exited-0"
wait_pane "secret 'API_TOKEN' saved in"
[[ $(pane) != *"tok-typed"* ]] || fail "the typed value was echoed"
[[ $("${meith[@]}" secret list) == "API_TOKEN" ]] || fail "meith secret list does not name it"

result=$("${meith[@]}" call show_token '{}')
[[ $result == *'"tail":"typed-0123456789"'* ]] || fail "the tool did not get the value: $result"
[[ $result == *'"token":"[REDACTED]"'* ]] || fail "the echoed value was not redacted: $result"
if grep -q "tok-typed-0123456789" "$home/audit.jsonl" "$home/meithd.log"; then
  fail "the value reached the audit log or meithd's log"
fi
echo "PASS: meith secret set took a value typed twice with echo off; the tool got it, its echo came back redacted"
