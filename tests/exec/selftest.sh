#!/bin/sh
# Self-test of the exec tool and hook test scripts in this folder (and the examples in
# examples/exec-tools and examples/hooks), without the daemon: pipes JSON into each one and
# compares what comes out.
#
#   sh tests/exec/selftest.sh        exit status 0 = every check passed
set -u

here=$(cd "$(dirname "$0")" && pwd)
examples=$(cd "$here/../../examples" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
passed=0
failed=0

# check NAME EXPECTED ACTUAL
check() {
    if [ "$2" = "$3" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3" >&2
    fi
}

# js EXPR JSON: prints the value of the JavaScript expression EXPR for `r` = JSON.parse(JSON)
js() {
    node -e 'const r = JSON.parse(process.argv[1]); const v = eval(process.argv[2]);
             process.stdout.write(typeof v === "string" ? v : JSON.stringify(v));' "$2" "$1"
}

# oneshot ARGS_JSON: runs oneshot.mjs with {"args":ARGS_JSON}; sets $out, $rc, $err
oneshot() {
    out=$(printf '{"args":%s}\n' "$1" | node "$here/oneshot.mjs" 2>"$tmp/err")
    rc=$?
    err=$(cat "$tmp/err")
}

# alive PID: the process exists and is not a zombie
alive() {
    [ -r "/proc/$1/stat" ] || return 1
    state=$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

rpc() { # rpc ID METHOD PARAMS_JSON
    printf '{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}\n' "$1" "$2" "$3"
}

# --- oneshot.mjs --------------------------------------------------------------------------------

oneshot '{"mode":"echo","x":[1,"two",{"three":null}]}'
check "oneshot echo" '{"result":{"mode":"echo","x":[1,"two",{"three":null}]}} rc=0' "$out rc=$rc"

oneshot '{"mode":"error"}'
check "oneshot error" '{"error":"asked to fail"} rc=0' "$out rc=$rc"

oneshot '{"mode":"pending"}'
check "oneshot pending" \
    '{"pending":{"reason":"requires_approval","message":"needs a human"}} rc=0' "$out rc=$rc"

oneshot '{"mode":"exit3"}'
check "oneshot exit3 stdout" '{"result":"ignored"} rc=3' "$out rc=$rc"
check "oneshot exit3 stderr" "$(printf 'line one\nsecret token=ghp_abcdefghijklmnopqrstuvwxyz0123456789\nlast words')" "$err"

oneshot '{"mode":"garbage"}'
check "oneshot garbage" 'not json rc=0' "$out rc=$rc"

oneshot '{"mode":"empty"}'
check "oneshot empty" ' rc=0' "$out rc=$rc"

printf '{"args":{"mode":"big","bytes":200000}}' | node "$here/oneshot.mjs" >"$tmp/big"
check "oneshot big: size" "200014" "$(wc -c <"$tmp/big" | tr -d ' ')"
check "oneshot big: content" '200000 x' "$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(r.result.length, [...new Set(r.result)].join(""))' "$tmp/big")"

oneshot '{"mode":"sleep","ms":300}'
check "oneshot sleep" '{"result":"slept"} rc=0' "$out rc=$rc"

out=$(printf '{"args":{"mode":"env"}}' | env -i PATH="$PATH" MEITH_TEST_VAR=hello node "$here/oneshot.mjs")
check "oneshot env" 'hello undefined' "$(js 'r.result.MEITH_TEST_VAR + " " + r.result.HOME' "$out")"

out=$(cd "$tmp" && printf '{"args":{"mode":"cwd"}}' | node "$here/oneshot.mjs")
check "oneshot cwd" "$(cd "$tmp" && pwd -P)" "$(js 'r.result' "$out")"

out=$(printf '{"args":{"mode":"fds"}}' | node "$here/oneshot.mjs" 7</dev/null)
check "oneshot fds: 0 1 2 7 listed" 'true' \
    "$(js '[0,1,2,7].every((fd) => r.result.includes(fd)) && r.result.every(Number.isInteger)' "$out")"
out=$(printf '{"args":{"mode":"fd_targets"}}' | node "$here/oneshot.mjs" 7<"$here/selftest.sh")
check "oneshot fd_targets" "$here/selftest.sh" "$(js 'r.result["7"]' "$out")"

oneshot '{"mode":"stdin"}'
check "oneshot stdin is exactly the request" '{"args":{"mode":"stdin"}}
' "$(js 'r.result' "$out")
"

oneshot '{"mode":"what"}'
check "oneshot unknown mode" '{"error":"unknown mode \"what\""} rc=0' "$out rc=$rc"

out=$(printf 'nope' | node "$here/oneshot.mjs" 2>/dev/null)
check "oneshot bad stdin" '{"error":"stdin is not {\"args\":{...}}"} rc=2' "$out rc=$?"

# --- grandchild.sh ------------------------------------------------------------------------------

out=$(echo '{}' | env -u PID_FILE sh "$here/grandchild.sh" 2>&1)
check "grandchild without PID_FILE" 'grandchild.sh: PID_FILE is not set rc=2' "$out rc=$?"

if command -v setsid >/dev/null 2>&1; then
    echo '{"args":{}}' | PID_FILE="$tmp/pids" setsid "$here/grandchild.sh" >/dev/null &
    bg=$!
    i=0
    while [ ! -s "$tmp/pids" ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    tool_pid=$(sed -n 1p "$tmp/pids")
    grand_pid=$(sed -n 2p "$tmp/pids")
    check "grandchild: pid file has 2 lines" 2 "$(wc -l <"$tmp/pids" | tr -d ' ')"
    check "grandchild: both running" "yes yes" \
        "$(alive "$tool_pid" && echo yes) $(alive "$grand_pid" && echo yes)"
    check "grandchild: same process group" "$tool_pid $tool_pid" \
        "$(ps -o pgid= -p "$tool_pid" | tr -d ' ') $(ps -o pgid= -p "$grand_pid" | tr -d ' ')"
    # (dash's kill builtin takes no negative process group ids)
    node -e 'process.kill(-Number(process.argv[1]), "SIGTERM")' "$tool_pid"
    wait "$bg" 2>/dev/null
    i=0
    while alive "$grand_pid" && [ $i -lt 30 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    check "grandchild: group kill ends both" "gone gone" \
        "$(alive "$tool_pid" || echo gone) $(alive "$grand_pid" || echo gone)"
else
    echo "skip: grandchild group checks (no setsid)" >&2
fi

# --- server.mjs ---------------------------------------------------------------------------------

# Request 1 sleeps longer than request 2: answers come by id in completion order.
out=$( (
    rpc 1 execute '{"args":{"mode":"sleep","ms":400}}'
    rpc 2 execute '{"args":{"mode":"sleep","ms":50}}'
    echo 'this line is not JSON'
    rpc 3 execute '{"args":{"mode":"echo","n":3}}'
    rpc 4 execute '{"args":{"mode":"error"}}'
    rpc 5 execute '{"args":{"mode":"bogus"}}'
    rpc 6 other '{}'
    rpc 7 execute '{"args":{"mode":"pid"}}'
    sleep 0.8
) | node "$here/server.mjs" --pid-file="$tmp/server.pid")
rc=$?
check "server answers" '{"jsonrpc":"2.0","id":3,"result":{"mode":"echo","n":3}}
{"jsonrpc":"2.0","id":4,"error":{"code":-32001,"message":"asked to fail","data":{"why":"test"}}}
{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown mode \"bogus\""}}
{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"unknown method \"other\""}}
{"jsonrpc":"2.0","id":7,"result":PID}
{"jsonrpc":"2.0","id":2,"result":"slept"}
{"jsonrpc":"2.0","id":1,"result":"slept"} rc=0' \
    "$(printf '%s' "$out" | sed "s/\"result\":$(cat "$tmp/server.pid")}/\"result\":PID}/") rc=$rc"

out=$( (rpc 1 execute '{"args":{"mode":"late","ms":100}}'; sleep 0.4) | node "$here/server.mjs")
check "server late" '{"jsonrpc":"2.0","id":1,"result":"late-answer"}' "$out"

out=$( (rpc 1 execute '{"args":{"mode":"crash"}}'; rpc 2 execute '{"args":{"mode":"echo"}}'; sleep 1) \
    | node "$here/server.mjs")
check "server crash" ' rc=9' "$out rc=$?"

out=$(sleep 1 | node "$here/server.mjs" --crash-after-start-ms=100)
check "server --crash-after-start-ms" ' rc=5' "$out rc=$?"

out=$(node "$here/server.mjs" </dev/null)
check "server exits 0 on EOF" ' rc=0' "$out rc=$?"

# --- hook.mjs -----------------------------------------------------------------------------------

before='{"hook":"tool","phase":"before_execution","request":{"name":"kv","args":{"op":"list"},"call_id":"c1","session_id":"s_1","caller":"cli"}}'
after='{"hook":"tool","phase":"after_execution","request":{"name":"kv","args":{}},"response":{"ok":true,"content":{"v":"TOPSECRET"}}}'
session='{"hook":"session","phase":"session_start","event":{"session_id":"s_1","pid":1,"uid":1000}}'

hook() { # hook PAYLOAD FLAGS...: sets $out and $rc
    payload=$1
    shift
    out=$(printf '%s' "$payload" | node "$here/hook.mjs" "$@" 2>/dev/null)
    rc=$?
}

hook "$before" --allow
check "hook --allow" '{"allow":true} rc=0' "$out rc=$rc"
hook "$before"
check "hook default allows" '{"allow":true} rc=0' "$out rc=$rc"
hook "$before" --deny="no way"
check "hook --deny" '{"allow":false,"reason":"no way"} rc=0' "$out rc=$rc"
hook "$before" --deny-tool=kv
check "hook --deny-tool match" '{"allow":false,"reason":"tool kv is blocked"}' "$out"
hook "$before" --deny-tool=other
check "hook --deny-tool other" '{"allow":true}' "$out"
hook "$session" --deny-tool=kv
check "hook --deny-tool session payload" '{"allow":true}' "$out"
hook "$before" --observe
check "hook --observe" '{"ack":true}' "$out"
hook "$before" --garbage
check "hook --garbage" 'nope rc=0' "$out rc=$rc"
hook "$before" --crash
check "hook --crash" ' rc=1' "$out rc=$rc"
hook "$after" --deny-if-result-contains=TOPSECRET
check "hook --deny-if-result-contains match" \
    '{"allow":false,"reason":"result contains TOPSECRET"}' "$out"
hook "$after" --deny-if-result-contains=OTHER
check "hook --deny-if-result-contains no match" '{"allow":true}' "$out"
hook "$before" --deny-if-result-contains=kv
check "hook --deny-if-result-contains before_execution" '{"allow":true}' "$out"
hook "$before" --observe --log="$tmp/hook.log"
hook "$session" --observe --log="$tmp/hook.log"
check "hook --log" "$before
$session" "$(cat "$tmp/hook.log")"
rm -f "$tmp/hook.log"

if command -v timeout >/dev/null 2>&1; then
    out=$(printf '%s' "$before" | timeout 1 node "$here/hook.mjs" --hang --log="$tmp/hook.log")
    check "hook --hang (killed by timeout, logged first)" " rc=124 $before" \
        "$out rc=$? $(cat "$tmp/hook.log")"
    rm -f "$tmp/hook.log"
fi

out=$( (
    rpc 1 hook "$before"
    echo 'junk'
    rpc 2 hook "$session"
    rpc 3 nothook '{}'
) | node "$here/hook.mjs" --server --deny-tool=kv --log="$tmp/hook.log")
check "hook --server --deny-tool" '{"jsonrpc":"2.0","id":1,"result":{"allow":false,"reason":"tool kv is blocked"}}
{"jsonrpc":"2.0","id":2,"result":{"allow":true}}
{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"unknown method \"nothook\""}} rc=0' "$out rc=$?"
check "hook --server --log logs params" "$before
$session" "$(cat "$tmp/hook.log")"

out=$(rpc 7 hook "$before" | node "$here/hook.mjs" --server --garbage)
check "hook --server --garbage" '{"jsonrpc":"2.0","id":7,"result":"nope"}' "$out"
out=$(rpc 7 hook "$before" | node "$here/hook.mjs" --server --observe)
check "hook --server --observe" '{"jsonrpc":"2.0","id":7,"result":{"ack":true}}' "$out"
out=$( (rpc 7 hook "$before"; sleep 0.3) | node "$here/hook.mjs" --server --hang)
check "hook --server --hang" ' rc=0' "$out rc=$?"
out=$( (rpc 7 hook "$before"; sleep 1) | node "$here/hook.mjs" --server --crash)
check "hook --server --crash" ' rc=1' "$out rc=$?"
out=$( (rpc 1 hook "$before"; rpc 2 hook "$after"; sleep 0.5) |
    node "$here/hook.mjs" --server --sleep-ms=100 --deny-if-result-contains=TOPSECRET)
check "hook --server --sleep-ms" '{"jsonrpc":"2.0","id":1,"result":{"allow":true}}
{"jsonrpc":"2.0","id":2,"result":{"allow":false,"reason":"result contains TOPSECRET"}}' "$out"

# --- examples -----------------------------------------------------------------------------------

out=$(printf '{"args":{"text":"one two\\nthree\\n"}}' | node "$examples/exec-tools/word_count.mjs")
check "word_count" '{"result":{"words":3,"lines":2,"chars":14}} rc=0' "$out rc=$?"
out=$(printf '{"args":{"text":7}}' | node "$examples/exec-tools/word_count.mjs")
check "word_count bad text" '{"error":"\"text\" must be a string, got number"} rc=0' "$out rc=$?"
out=$(printf '{"args":{}}' | node "$examples/exec-tools/word_count.mjs")
check "word_count no text" '{"error":"missing argument \"text\""} rc=0' "$out rc=$?"

out=$( (
    rpc 1 execute '{"args":{"op":"set","key":"a","value":[1,2]}}'
    rpc 2 execute '{"args":{"op":"get","key":"a"}}'
    rpc 3 execute '{"args":{"op":"list"}}'
    rpc 4 execute '{"args":{"op":"delete","key":"a"}}'
    rpc 5 execute '{"args":{"op":"get","key":"a"}}'
    rpc 6 execute '{"args":{"op":"pop"}}'
) | node "$examples/exec-tools/kv_server.mjs")
check "kv_server" '{"jsonrpc":"2.0","id":1,"result":{"key":"a","value":[1,2],"previous":null}}
{"jsonrpc":"2.0","id":2,"result":{"key":"a","found":true,"value":[1,2]}}
{"jsonrpc":"2.0","id":3,"result":{"keys":["a"],"count":1}}
{"jsonrpc":"2.0","id":4,"result":{"key":"a","deleted":true}}
{"jsonrpc":"2.0","id":5,"result":{"key":"a","found":false,"value":null}}
-32602 rc=0' "$(printf '%s' "$out" | sed '$s/.*"code":\(-[0-9]*\).*/\1/') rc=$?"

git_call='{"hook":"tool","phase":"before_execution","request":{"name":"delete_file","args":{"path":"a/../.git/config"}}}'
out=$(printf '%s' "$git_call" | node "$examples/hooks/block_destructive.mjs")
check "block_destructive .git" '{"allow":false,"reason":"refusing to touch .git"}' "$out"
out=$(printf '%s' "$before" | node "$examples/hooks/block_destructive.mjs")
check "block_destructive other" '{"allow":true}' "$out"
out=$(rpc 1 hook "$git_call" | node "$examples/hooks/block_destructive.mjs" --server)
check "block_destructive --server" \
    '{"jsonrpc":"2.0","id":1,"result":{"allow":false,"reason":"refusing to touch .git"}}' "$out"
out=$(printf '%s' "$after" | MEITH_HOME="$tmp" node "$examples/hooks/log_calls.mjs")
check "log_calls answer" '{"ack":true}' "$out"
check "log_calls line" "$after" "$(js 'delete r.loggedAt, r' "$(cat "$tmp/hook-events.jsonl")")"

echo "selftest: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
