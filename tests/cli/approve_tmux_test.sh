#!/usr/bin/env bash
# `meith approve` as a person uses it (PROTOCOL.md §12): it runs in a tmux pane against a real
# meithd; calls held for approval are answered by typing into the pane (tmux send-keys) and
# the screen is read back (tmux capture-pane). Covers y (once), n with a reason, s (session),
# and q to quit. meithd itself runs in a tmux window, so it has a controlling terminal: its
# tools must not (they run in sessions of their own), or a tool could pass as an approver.
#   approve_tmux_test.sh BIN_DIR
set -euo pipefail
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" approve approve

# A one-shot exec tool that reports its controlling terminal (field 7 of /proc/self/stat). It
# lives outside meithd's home, which no tool can see.
tools=$(mktemp -d /tmp/meith-approve-tools.XXXXXX)
trap 'rm -rf "$tools"; tmux_cleanup' EXIT
cat >"$tools/tty.sh" <<'SH'
#!/bin/sh
cat >/dev/null
set -- $(cat /proc/$$/stat)
printf '{"result": {"ttyNr": %s}}\n' "$7"
SH
cat >"$home/meithd.toml" <<TOML
[[permissions.rules]]
tool = "echo"
caller = "plugin"
decision = "ask"

[[sources]]
name = "tty"
kind = "exec"
command = ["sh", "$tools/tty.sh"]
tool = { name = "tty_of_tool", description = "the tool's controlling terminal", capabilities = ["read-only"] }
sandbox_paths = { exec = ["$(command -v cat)"] }   # its one helper program
TOML
# meithd in a terminal of its own, as someone running it in the foreground does.
TERM=xterm t new-session -d -s daemon -x 150 -y 20 \
  "MEITH_NO_AUTOSTART=1 $bin/meithd --home $home --socket $home/d.sock 2>$home/meithd.log; sleep 30"
for _ in $(seq 100); do [[ -S "$home/d.sock" && -s "$home/config.json" ]] && break; sleep 0.1; done
[[ -S "$home/d.sock" ]] || fail "meithd did not start"
daemon=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$home/config.json")
[[ -n "$daemon" ]] || fail "no pid in config.json"
read -r -a stat <"/proc/$daemon/stat"
[[ ${stat[6]} != 0 ]] || fail "meithd has no controlling terminal in its tmux window"

meith=("$bin/meith" --home "$home")
# Its tools run without one.
tty_out=$("${meith[@]}" call tty_of_tool) || fail "tty_of_tool failed: $tty_out"
[[ $tty_out == *'"ttyNr":0'* ]] || fail "a tool has meithd's controlling terminal: $tty_out"

# A person starts the approver in a terminal.
TERM=xterm t new-session -d -s approve -x 150 -y 50 \
  "MEITH_NO_AUTOSTART=1 $bin/meith --home $home approve; echo approver-exited-\$?; sleep 30"
wait_pane "Waiting for held calls"

# 1. An agent's call is held; the person reads it and types y.
"${meith[@]}" --caller plugin call echo '{"msg":"first"}' >"$home/out1" 2>&1 &
call=$!
wait_pane "Allow? y = once"
screen=$(pane)
[[ "$screen" == *"tool       echo"* ]] || fail "the held call does not name the tool"
[[ "$screen" == *"asks for approval"* ]] || fail "the held call does not say why it was asked"
[[ "$screen" == *'"msg":"first"'* ]] || fail "the held call does not show its arguments"
grep -q "\[approval\] waiting for a person to approve it in \`meith approve\`" "$home/out1" ||
  fail "the held call does not say it waits for approval: $(cat "$home/out1")"
t send-keys -t approve "y"   # a single key: no Enter
status=0; wait "$call" || status=$?
[[ $status -eq 0 ]] || fail "the approved call exited $status: $(cat "$home/out1")"
grep -q first "$home/out1" || fail "the approved call did not print its result: $(cat "$home/out1")"
wait_pane "allowed once"

# 2. Denied with a reason the caller sees.
"${meith[@]}" --caller plugin call echo '{"msg":"second"}' >"$home/out2" 2>&1 &
call=$!
for _ in $(seq 100); do [[ $(count_pane "Allow? y = once") -ge 2 ]] && break; sleep 0.1; done
[[ $(count_pane "Allow? y = once") -ge 2 ]] || fail "the second call was not shown"
t send-keys -t approve "n"
wait_pane "Reason (Enter for none)"
t send-keys -t approve "not on a Friday" Enter
status=0; wait "$call" || status=$?
[[ $status -eq 1 ]] || fail "the denied call exited $status (want 1): $(cat "$home/out2")"
grep -q "PERMISSION_DENIED" "$home/out2" || fail "the denied call does not say PERMISSION_DENIED: $(cat "$home/out2")"
grep -q "not on a Friday" "$home/out2" || fail "the denial does not carry the reason: $(cat "$home/out2")"
wait_pane "denied — not on a Friday"

# 3. For the session.
"${meith[@]}" --caller plugin call echo '{"msg":"third"}' >"$home/out3" 2>&1 &
call=$!
for _ in $(seq 100); do [[ $(count_pane "Allow? y = once") -ge 3 ]] && break; sleep 0.1; done
t send-keys -t approve "s" Enter   # an Enter out of habit after the key changes nothing
status=0; wait "$call" || status=$?
[[ $status -eq 0 ]] || fail "the session-approved call exited $status: $(cat "$home/out3")"
wait_pane "allowed for the session"

# Every decision is on file.
audit=$(cat "$home/audit.jsonl")
[[ $(grep -c '"event":"approval_decision"' <<<"$audit") -eq 3 ]] || fail "want 3 approval_decision lines"
[[ $(grep -c '"event":"grant_created"' <<<"$audit") -eq 1 ]] || fail "want 1 grant_created line (allow_session)"

# 4. meithd restarts (issue 40: the approver used to exit and never say to run it again): the
# approver says so, reconnects with back-off and answers the new daemon's held calls.
kill "$daemon"
for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
wait_pane "meithd closed the connection"
TERM=xterm t new-session -d -s daemon2 -x 150 -y 20 \
  "MEITH_NO_AUTOSTART=1 $bin/meithd --home $home --socket $home/d.sock 2>>$home/meithd.log; sleep 30"
wait_pane "reconnected to meithd"
for _ in $(seq 100); do
  new=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$home/config.json" 2>/dev/null || true)
  [[ -n "$new" && "$new" != "$daemon" ]] && break
  sleep 0.1
done
daemon=$new
"${meith[@]}" --caller plugin call echo '{"msg":"after restart"}' >"$home/out5" 2>&1 &
call=$!
wait_pane '"msg":"after restart"'
t send-keys -t approve "y"
status=0; wait "$call" || status=$?
[[ $status -eq 0 ]] || fail "the call approved after the restart exited $status: $(cat "$home/out5")"

# 5. q quits.
# A fourth call nobody answers: it ends saying so, not as a tool that did not finish.
"${meith[@]}" --caller plugin call echo '{"msg":"fourth"}' --timeout-ms 1500 >"$home/out4" 2>&1 &
call=$!
status=0; wait "$call" || status=$?
[[ $status -eq 1 ]] || fail "the unanswered call exited $status (want 1): $(cat "$home/out4")"
grep -q "no approver answered within 1.5 s (the call's timeout); it did not run" "$home/out4" ||
  fail "the unanswered call does not say nobody answered: $(cat "$home/out4")"

t send-keys -t approve "q"
wait_pane "approver-exited-0"
echo "PASS: meith approve answered y, n with a reason, s (single keys), reconnected after meithd restarted, an unanswered call ended saying so, and q quit"
