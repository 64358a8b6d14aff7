#!/usr/bin/env bash
# Secrets in the desktop's Secret Service (docs/security.md "Secrets"): on a private session bus
# (dbus-run-session) with GNOME Keyring's secrets component unlocked, `meith secret set` stores
# the value as a keyring item (application=meith, meith-home, name), not in meith's own store;
# meithd reads it back for a source's env at each run, and the echoed value comes back
# redacted; `meith secret list` and `rm` see the keyring's items.
#   secret_service_test.sh BIN_DIR
set -euo pipefail
bin=$1
for tool in dbus-run-session gnome-keyring-daemon secret-tool; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps)"; exit 77; }
done
if [[ -z ${MEITH_IN_BUS:-} ]]; then
  # A home of our own: the keyring writes its files under it.
  export HOME=$(mktemp -d /tmp/meith-secret-service.XXXXXX)
  trap 'rm -rf "$HOME"' EXIT
  MEITH_IN_BUS=1 dbus-run-session -- bash "$0" "$@" 2> >(grep -v "Failed to set fd limit" >&2)
  exit $?
fi

fail() { echo "FAIL: $*"; echo "--- meithd log:"; cat "$home/meithd.log" 2>/dev/null || true; exit 1; }
printf 'unlock-password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
home="$HOME/meith-home"
tools="$HOME/tools"
mkdir -p "$home" "$tools"
chmod 700 "$home"
export MEITH_SECRETS_KEY="$HOME/keys/secrets.key" MEITH_NO_AUTOSTART=1
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
"$bin/meithd" --home "$home" --socket "$home/d.sock" 2>"$home/meithd.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -S $home/d.sock ]] && break; sleep 0.1; done
meith=("$bin/meith" --home "$home")

out=$(printf 'tok-keyring-0123456789' | "${meith[@]}" secret set API_TOKEN) || fail "secret set: $out"
[[ $out == *"saved in the desktop's Secret Service"* ]] || fail "not saved in the Secret Service: $out"
[[ ! -e $home/secrets.enc ]] || fail "meith's own store was written too"
stored=$(secret-tool lookup application meith meith-home "$home" name API_TOKEN) ||
  fail "no keyring item with meith's attributes"
[[ $stored == "tok-keyring-0123456789" ]] || fail "the keyring holds '$stored'"
[[ $("${meith[@]}" secret list) == "API_TOKEN" ]] || fail "meith secret list does not name it"

result=$("${meith[@]}" call show_token '{}') || fail "the call failed: $result"
[[ $result == *'"tail":"keyring-0123456789"'* ]] || fail "the tool did not get the value: $result"
[[ $result == *'"token":"[REDACTED]"'* ]] || fail "the echoed value was not redacted: $result"

"${meith[@]}" secret rm API_TOKEN >/dev/null || fail "secret rm failed"
secret-tool lookup application meith meith-home "$home" name API_TOKEN >/dev/null &&
  fail "the keyring item is still there"
refused=$("${meith[@]}" call show_token '{}' 2>&1 || true)
[[ $refused == *"run \`meith secret set API_TOKEN\`"* ]] || fail "a removed secret's call says: $refused"
echo "PASS: meith secret set stored the value in the Secret Service; meithd filled it in, redacted its echo; rm removed it"
