#!/usr/bin/env bash
# `meith audit --follow` as a person uses it: it runs in a tmux pane against a real meithd, a
# call made meanwhile shows up in the pane (tmux capture-pane), and Ctrl-C (tmux send-keys C-c)
# ends it with exit status 0.
#   audit_follow_tmux_test.sh BIN_DIR
set -euo pipefail
bin=$1
command -v tmux >/dev/null || { echo "tmux is not installed (scripts/install-deps)"; exit 1; }

home=$(mktemp -d /tmp/meith-follow.XXXXXX)
tmux_sock="meith-follow-$$"
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
pane() { tmux -L "$tmux_sock" capture-pane -p -t follow -S -200; }
# Waits until the pane shows a line matching the extended regex $1, up to 10 s.
wait_pane() {
  local screen
  for _ in $(seq 100); do
    screen=$(pane 2>/dev/null || true)
    grep -qE -- "$1" <<<"$screen" && return 0
    sleep 0.1
  done
  fail "the pane never showed /$1/"
}

export MEITH_NO_AUTOSTART=1
"$bin/meithd" --home "$home" --socket "$home/d.sock" 2>"$home/meithd.log" &
daemon=$!
for _ in $(seq 100); do [[ -S "$home/d.sock" && -s "$home/config.json" ]] && break; sleep 0.1; done
[[ -s "$home/config.json" ]] || fail "meithd did not start"
meith=("$bin/meith" --home "$home")

# A person follows the log in a terminal; bash reports how it ended.
TERM=xterm tmux -L "$tmux_sock" new-session -d -s follow -x 160 -y 40 \
  "bash -c 'MEITH_NO_AUTOSTART=1 $bin/meith --home $home audit --follow; echo follow-exited-\$?; sleep 30'"
wait_pane "^TIME +EVENT +TOOL"
follower=$(pgrep -f -- "^$bin/meith --home $home audit --follow$" || true)
[[ -n "$follower" ]] || fail "meith audit --follow is not running"

# A call made meanwhile shows up, as a row of the table.
out=$("${meith[@]}" call echo '{}') || fail "meith call echo failed: $out"
wait_pane "tool_call +echo +cli +allow +ok"
# And a denied one with its reason.
"${meith[@]}" --caller plugin call t_nope '{}' >/dev/null 2>&1 || true
wait_pane "tool_call +t_nope +plugin .*UNKNOWN_TOOL .*no tool named 't_nope'"

# Ctrl-C ends it, with exit status 0, and the process is gone.
tmux -L "$tmux_sock" send-keys -t follow C-c
wait_pane "follow-exited-0$" # after the terminal's ^C
for _ in $(seq 50); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$follower" 2>/dev/null; then fail "meith audit --follow (pid $follower) still runs"; fi
echo "PASS: meith audit --follow showed a new call in a terminal and ended on Ctrl-C with status 0"
