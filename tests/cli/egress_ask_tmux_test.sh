#!/usr/bin/env bash
# `network.ask` as a person meets it (docs/protocol.md §19): a confined tool's connection to a
# target no rule names is held, `meith approve` in a tmux pane shows it, and the person types
# y (once), a (always: the target lands in the config's network.allow) and n with a reason.
# The target is tests/exec/egress_target.mjs on 127.0.0.1 (the source says allow_private);
# names resolve through a test hosts file (MEITH_EGRESS_TEST_HOSTS), not DNS.
#   egress_ask_tmux_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" egress-ask approve

target_out=$(mktemp /tmp/meith-egress-target.XXXXXX)
target=""
cleanup() {
  [[ -n "$target" ]] && kill "$target" 2>/dev/null || true
  rm -f "$target_out"
  tmux_cleanup
}
trap cleanup EXIT
# Its stdin is a fifo this script holds open: the target ends at EOF, so at the latest when
# the script does.
mkfifo "$home/target.in"
node "$src/tests/exec/egress_target.mjs" --name=web <"$home/target.in" >"$target_out" &
target=$!
exec 4>"$home/target.in"
for _ in $(seq 100); do grep -q listening "$target_out" && break; sleep 0.1; done
port=$(sed -n 's/^listening //p' "$target_out")
[[ -n "$port" ]] || fail "the test's target did not start"

printf 'docs.test 127.0.0.1\nkept.test 127.0.0.1\nbad.test 127.0.0.1\n' >"$home/hosts"
export MEITH_EGRESS_TEST_HOSTS="$home/hosts"
cat >"$home/meithd.toml" <<TOML
[permissions.callers.plugin]
allow = ["read-only", "accesses-network"]

[[sources]]
name = "web"
kind = "exec"
command = ["node", "$src/tests/exec/sandbox_probe.mjs"]
tool = { name = "fetch_page", description = "reaches a host", capabilities = ["accesses-network"] }
# nothing allowed outright: every host is asked about
network = { allow = [], ask = true, allow_private = true }
TOML
start_daemon --socket "$home/d.sock"
meith=("$bin/meith" --home "$home")
state=$("${meith[@]}" sources web 2>&1 || true)
if [[ "$state" == *"network namespace"* ]]; then
  echo "SKIP: this kernel gives no network namespace to a confined tool: $state"
  exit 77
fi

reach() { # HOST: the call's JSON arguments
  printf '{"action":"egress","via":"connect","host":"%s","port":%s}' "$1" "$port"
}

TERM=xterm t new-session -d -s approve -x 160 -y 50 \
  "MEITH_NO_AUTOSTART=1 $bin/meith --home $home approve; echo approver-exited-\$?; sleep 30"
wait_pane "Waiting for held calls"

# 1. Once: the person reads where the tool connects and types y; the bytes arrive.
"${meith[@]}" --caller plugin call fetch_page "$(reach docs.test)" >"$home/out1" 2>&1 &
call=$!
wait_pane "Held connection"
wait_pane "a = always"
screen=$(pane)
[[ "$screen" == *"from source 'web'"* ]] || fail "the held connection does not name its source"
[[ "$screen" == *"to         docs.test:$port  (via connect)"* ]] || fail "the held connection does not name its target"
[[ "$screen" == *"for        fetch_page by plugin"* ]] || fail "the held connection does not name the tool and caller"
t send-keys -t approve "y"
status=0; wait "$call" || status=$?
[[ $status -eq 0 ]] || fail "the call exited $status: $(cat "$home/out1")"
grep -q "hello from web" "$home/out1" || fail "the allowed connection's bytes did not arrive: $(cat "$home/out1")"
wait_pane "allowed once"

# 2. Always: allowed, and kept in the config file.
"${meith[@]}" --caller plugin call fetch_page "$(reach kept.test)" >"$home/out2" 2>&1 &
call=$!
for _ in $(seq 100); do [[ $(count_pane "Held connection") -ge 2 ]] && break; sleep 0.1; done
[[ $(count_pane "Held connection") -ge 2 ]] || fail "the second connection was not shown"
t send-keys -t approve "a"
status=0; wait "$call" || status=$?
[[ $status -eq 0 ]] || fail "the call exited $status: $(cat "$home/out2")"
grep -q "hello from web" "$home/out2" || fail "the always-allowed connection's bytes did not arrive"
wait_pane "allowed always (kept in the config)"
grep -qF "network = { allow = [\"kept.test:$port\", ], ask = true, allow_private = true }" "$home/meithd.toml" ||
  fail "the config does not hold the kept rule: $(cat "$home/meithd.toml")"
grep -q "# nothing allowed outright" "$home/meithd.toml" || fail "the config lost its comment"
# Kept: the next connection there is not asked about (nobody answers it).
"${meith[@]}" --caller plugin call fetch_page "$(reach kept.test)" >"$home/out3" 2>&1 ||
  fail "the kept target was asked again: $(cat "$home/out3")"
grep -q "hello from web" "$home/out3" || fail "the kept target's bytes did not arrive"

# 3. Denied with a reason: the tool's caller sees it.
"${meith[@]}" --caller plugin call fetch_page "$(reach bad.test)" >"$home/out4" 2>&1 &
call=$!
for _ in $(seq 100); do [[ $(count_pane "Held connection") -ge 3 ]] && break; sleep 0.1; done
[[ $(count_pane "Held connection") -ge 3 ]] || fail "the third connection was not shown"
t send-keys -t approve "n"
wait_pane "Reason (Enter for none)"
t send-keys -t approve "not that site" Enter
wait "$call" || true
grep -q '"done":false' "$home/out4" || fail "the denied connection went through: $(cat "$home/out4")"
grep -q "a person refused it at \`meith approve\`: not that site" "$home/out4" ||
  fail "the caller does not see the person's reason: $(cat "$home/out4")"
wait_pane "denied — not that site"

# On file: three requests, three decisions, the rule added.
audit=$(cat "$home/audit.jsonl")
[[ $(grep -c '"event":"approval_request","approvalId":"[^"]*","kind":"egress"' <<<"$audit") -eq 3 ]] ||
  fail "want 3 egress approval_request lines"
[[ $(grep -c '"event":"egress_rule_added"' <<<"$audit") -eq 1 ]] || fail "want 1 egress_rule_added line"

t send-keys -t approve "q"
wait_pane "approver-exited-0"
echo "PASS: meith approve held egress connections: y (once), a (always, kept in the config), n with a reason"
