#!/usr/bin/env bash
# `meith call` in a terminal, as a person uses it (issue 19, docs/protocol.md §16): Ctrl-C typed
# into a tmux pane cancels the call, the tool stops working (its side effects stop: the ticker's
# file stops growing and says why), and meith exits with status 130; JSON printed to a
# terminal is indented, while the same command into a pipe prints one line.
#   call_interrupt_tmux_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
command -v tmux >/dev/null || { echo "tmux is not installed (scripts/install-deps)"; exit 1; }

home=$(mktemp -d /tmp/meith-interrupt.XXXXXX)
tmux_sock="meith-interrupt-$$"
daemon=""
cleanup() {
  if [[ -n "$daemon" ]]; then
    kill "$daemon" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
  fi
  tmux -L "$tmux_sock" kill-server >/dev/null 2>&1 || true
  rm -rf "$home"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- pane:"; pane || true; echo "--- meithd log:"; cat "$home/meithd.log" || true; exit 1; }
pane() { tmux -L "$tmux_sock" capture-pane -p -t term -S -200; }
wait_pane() {
  local screen
  for _ in $(seq 100); do
    screen=$(pane 2>/dev/null || true)
    [[ "$screen" == *"$1"* ]] && return 0
    sleep 0.1
  done
  fail "the pane never showed '$1'"
}

cat >"$home/meithd.toml" <<TOML
[[sources]]
name = "th"
kind = "host"
command = ["node", "$src/tests/hosts/test_host.mjs"]
sandbox = "off"    # the ticker writes where the test tells it
TOML
export MEITH_NO_AUTOSTART=1
"$bin/meithd" --home "$home" 2>"$home/meithd.log" &
daemon=$!
for _ in $(seq 100); do [[ -s "$home/config.json" ]] && break; sleep 0.1; done
[[ -s "$home/config.json" ]] || fail "meithd did not start"

meith="$bin/meith --home $home"
ticks="$home/ticks"
TERM=xterm tmux -L "$tmux_sock" new-session -d -s term -x 160 -y 50 "bash --norc"
tmux -L "$tmux_sock" send-keys -t term \
  "$meith call t_ticker '{\"path\":\"$ticks\",\"interval_ms\":20}'; echo call-exited-\$?" Enter
for _ in $(seq 100); do [[ $( (wc -l <"$ticks") 2>/dev/null || echo 0) -ge 5 ]] && break; sleep 0.1; done
[[ $(wc -l <"$ticks") -ge 5 ]] || fail "the ticker never ticked"

# The person presses Ctrl-C.
tmux -L "$tmux_sock" send-keys -t term C-c
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
tmux -L "$tmux_sock" send-keys -t term "clear; $meith status --json" Enter
wait_pane '  "running": true'
piped=$($meith status --json)
[[ $(wc -l <<<"$piped") == 1 && $piped == '{"running":true,'* ]] || fail "piped JSON is not one line: $piped"
echo "ok: Ctrl-C cancelled the call, the tool stopped ($after lines), exit 130; JSON by terminal"
