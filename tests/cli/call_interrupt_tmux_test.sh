#!/usr/bin/env bash
# `meith call` in a terminal, as a person uses it (issue 19, docs/protocol.md §16): Ctrl-C typed
# into a tmux pane cancels the call, the tool stops working (its side effects stop: the ticker's
# file stops growing and says why), and meith exits with status 130; JSON printed to a
# terminal is indented, while the same command into a pipe prints one line.
#   call_interrupt_tmux_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" interrupt term

cat >"$home/meithd.toml" <<TOML
[[sources]]
name = "th"
kind = "host"
command = ["node", "$src/tests/hosts/test_host.mjs"]
sandbox = "off"    # the ticker writes where the test tells it
TOML
start_daemon

meith="$bin/meith --home $home"
ticks="$home/ticks"
TERM=xterm t new-session -d -s term -x 160 -y 50 "bash --norc"
t send-keys -t term \
  "$meith call t_ticker '{\"path\":\"$ticks\",\"interval_ms\":20}'; echo call-exited-\$?" Enter
for _ in $(seq 100); do [[ $( (wc -l <"$ticks") 2>/dev/null || echo 0) -ge 5 ]] && break; sleep 0.1; done
[[ $(wc -l <"$ticks") -ge 5 ]] || fail "the ticker never ticked"

# The person presses Ctrl-C.
t send-keys -t term C-c
wait_pane "call-exited-130"
screen=$(pane)
[[ $screen == *"cancelling"* ]] || fail "no 'cancelling' notice"
[[ $screen == *"CANCELLED"* ]] || fail "no CANCELLED result"
# The work stopped: the tool saw the cancel and its file no longer grows.
for _ in $(seq 50); do grep -q '^stopped:' "$ticks" && break; sleep 0.1; done
grep -q '^stopped: .*cancelled' "$ticks" || fail "the tool did not stop: $(tail -3 "$ticks")"
before=$(wc -l <"$ticks")
sleep 0.5
after=$(wc -l <"$ticks")
[[ $before == "$after" ]] || fail "the tool kept working after the cancel ($before -> $after lines)"

# JSON for a person: indented in the terminal; one line into a pipe.
t send-keys -t term "clear; $meith status --json" Enter
wait_pane '  "running": true'
piped=$($meith status --json)
[[ $(wc -l <<<"$piped") == 1 && $piped == '{"running":true,'* ]] || fail "piped JSON is not one line: $piped"
echo "ok: Ctrl-C cancelled the call, the tool stopped ($after lines), exit 130; JSON by terminal"
