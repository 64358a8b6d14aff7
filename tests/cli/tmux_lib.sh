# Shared by the tmux tests (sourced, not run): a temporary home, a private tmux server, cleanup,
# reading a pane back, and meithd started in the background.
#   source tmux_lib.sh NAME PANE
# NAME names the home (/tmp/meith-NAME.XXXXXX) and the tmux server (-L meith-NAME-PID); PANE is
# the session that pane/wait_pane read. Sets `home`, `tmux_sock`, `daemon` (a pid to stop at
# exit, set by start_daemon or by the test). Needs `bin` (the build's bin directory) set.

command -v tmux >/dev/null || { echo "tmux is not installed (scripts/install-deps)"; exit 1; }
home=$(mktemp -d "/tmp/meith-$1.XXXXXX")
tmux_sock="meith-$1-$$"
tmux_pane=$2
daemon=""
export MEITH_NO_AUTOSTART=1

tmux_cleanup() {
  if [[ -n "$daemon" ]]; then
    kill "$daemon" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
  fi
  tmux -L "$tmux_sock" kill-server >/dev/null 2>&1 || true
  rm -rf "$home"
}
trap tmux_cleanup EXIT

# The test's own tmux server: t new-session ..., t send-keys ...
t() { tmux -L "$tmux_sock" "$@"; }
# A command that fails under `set -e` outside the checks says which.
trap 'echo "FAIL: line $LINENO: \`$BASH_COMMAND\` exited $?"' ERR
# A session that holds the server for the test's whole life. Without it, killing the test's
# only session makes the server exit (tmux's exit-empty), and a `t new-session` that reaches
# it while it exits fails with "server exited unexpectedly" (seen under load in CI).
# The server starts here, so its panes get the environment as it is now: a variable the test
# sets later reaches a pane only on the pane's command line (or `t new-session -e VAR=…`).
tmux -L "$tmux_sock" -f /dev/null new-session -d -s keeper -x 80 -y 10 "sleep 3600"
# The pane's screen and 200 lines of scrollback.
pane() { t capture-pane -p -t "$tmux_pane" -S -200; }
fail() {
  echo "FAIL: $*"
  echo "--- pane:"; pane || true
  echo "--- meithd log:"; cat "$home/meithd.log" || true
  exit 1
}
# Waits up to 10 s until the pane shows $1, a fixed string.
wait_pane() {
  local screen
  for _ in $(seq 100); do
    screen=$(pane 2>/dev/null || true)
    [[ "$screen" == *"$1"* ]] && return 0
    sleep 0.1
  done
  fail "the pane never showed '$1'"
}
# Waits up to 10 s until a line of the pane matches $1, an extended regex.
wait_pane_re() {
  local screen
  for _ in $(seq 100); do
    screen=$(pane 2>/dev/null || true)
    grep -qE -- "$1" <<<"$screen" && return 0
    sleep 0.1
  done
  fail "the pane never showed /$1/"
}
# How many lines of the pane contain $1.
count_pane() { local screen; screen=$(pane); grep -cF -- "$1" <<<"$screen" || true; }
# Starts meithd in the background on $home (extra arguments passed on), its stderr in
# $home/meithd.log; returns once config.json is written (up to 10 s).
start_daemon() {
  "$bin/meithd" --home "$home" "$@" 2>"$home/meithd.log" &
  daemon=$!
  for _ in $(seq 100); do [[ -s "$home/config.json" ]] && break; sleep 0.1; done
  [[ -s "$home/config.json" ]] || fail "meithd did not start"
}
