#!/usr/bin/env bash
# `meith audit --follow` as a person uses it: it runs in a tmux pane against a real meithd, a
# call made meanwhile shows up in the pane (tmux capture-pane), and Ctrl-C (tmux send-keys C-c)
# ends it with exit status 0.
#   audit_follow_tmux_test.sh BIN_DIR
set -euo pipefail
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" follow follow
start_daemon --socket "$home/d.sock"
meith=("$bin/meith" --home "$home")

# A person follows the log in a terminal; bash reports how it ended.
TERM=xterm t new-session -d -s follow -x 160 -y 40 \
  "bash -c 'MEITH_NO_AUTOSTART=1 $bin/meith --home $home audit --follow; echo follow-exited-\$?; sleep 30'"
wait_pane_re "^TIME +EVENT +TOOL"
follower=$(pgrep -f -- "^$bin/meith --home $home audit --follow$" || true)
[[ -n "$follower" ]] || fail "meith audit --follow is not running"

# A call made meanwhile shows up, as a row of the table.
out=$("${meith[@]}" call echo '{}') || fail "meith call echo failed: $out"
wait_pane_re "tool_call +echo +cli +allow +ok"
# And a denied one with its reason.
"${meith[@]}" --caller plugin call t_nope '{}' >/dev/null 2>&1 || true
wait_pane_re "tool_call +t_nope +plugin .*UNKNOWN_TOOL .*no tool named 't_nope'"

# Ctrl-C ends it, with exit status 0, and the process is gone.
t send-keys -t follow C-c
wait_pane_re "follow-exited-0$" # after the terminal's ^C
for _ in $(seq 50); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$follower" 2>/dev/null; then fail "meith audit --follow (pid $follower) still runs"; fi
echo "PASS: meith audit --follow showed a new call in a terminal and ended on Ctrl-C with status 0"
