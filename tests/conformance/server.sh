#!/usr/bin/env bash
# The conformance suite's server scenarios against `meith mcp`: the suite (an HTTP client)
# → supergateway (a stdio ↔ Streamable HTTP bridge, pinned in package.json) → `meith mcp`
# → meithd (auto-started for a fresh home) → everything_server.mjs, a `kind = "mcp"` source
# in that home's meithd.toml, confined as meith confines any source. Then `run.sh server`
# runs every scenario at the bridge's URL (MEITH_CONFORMANCE_URL).
#
#   MEITH_BIN=build/bin tests/conformance/server.sh            # through meith
#   tests/conformance/server.sh --direct                       # the bridge in front of
#       everything_server.mjs, no meith: what the bridge alone passes (expected-failures.yml)
# Exit status: run.sh's (77 when the suite is not installed).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
direct=0
[[ "${1:-}" == --direct ]] && direct=1
bridge="$here/node_modules/.bin/supergateway"
suite_node="$here/node_modules/.bin/node"
if [[ ! -x "$bridge" || ! -x "$suite_node" ]]; then
    echo "SKIPPED: the conformance suite is not installed (cd tests/conformance && npm ci)"
    exit 77
fi
# The source's node: the one the project's tests use (PATH, outside tests/conformance), else
# the suite's Node 22; either runs confined by meith's sandbox.
node="$(command -v node || true)"
[[ -n "$node" ]] || node="$suite_node"
if ((!direct)); then
    bin="$(cd "${MEITH_BIN:?MEITH_BIN: the folder of meith and meithd}" && pwd)"
fi
export PATH="$here/node_modules/.bin:$PATH" # the bridge and the suite need Node 22

home="$(mktemp -d "${TMPDIR:-/tmp}/meith-conf-server.XXXXXX")"
bridge_pid=""
cleanup() {
    [[ -n "$bridge_pid" ]] && kill "$bridge_pid" 2>/dev/null && wait "$bridge_pid" 2>/dev/null
    ((direct)) || MEITH_HOME="$home" "$bin/meith" stop >/dev/null 2>&1
    rm -rf "$home"
}
trap cleanup EXIT
show_logs() {
    echo "--- bridge log (last 40 lines)"; tail -40 "$home/bridge.log" 2>/dev/null
    ((direct)) && return
    echo "--- meithd log (last 40 lines)"; tail -40 "$home/meithd.log" 2>/dev/null
    echo "--- meith sources conf"; MEITH_HOME="$home" "$bin/meith" --no-autostart sources conf 2>&1
}

if ((direct)); then
    stdio_cmd="$(printf '%q %q' "$node" "$here/everything_server.mjs")"
else
    cat >"$home/meithd.toml" <<EOF
[[sources]]
name = "conf"
kind = "mcp"
command = ["$node", "$here/everything_server.mjs"]
# Its tools all say readOnlyHint: trusted, they are read-only and the server runs confined
# to reading. No prefix: the scenarios call the tools and prompts by their own names.
trust_annotations = true

# The suite calls every tool, reads every resource and gets every prompt.
[[permissions.rules]]
tool = "*"
decision = "allow"
EOF
    # meithd started (`meith` auto-starts it) and the source ready before the first scenario.
    export MEITH_HOME="$home"
    if ! "$bin/meith" sources >/dev/null; then
        echo "server.sh: meithd did not start" >&2
        show_logs >&2
        exit 1
    fi
    conf_ready() {
        "$bin/meith" sources --json 2>/dev/null | node -e 'let s = "";
            process.stdin.on("data", (d) => s += d).on("end", () => process.exit(
                JSON.parse(s || "[]").some((x) => x.name === "conf" && x.state === "ready") ? 0 : 1))'
    }
    for _ in $(seq 100); do
        conf_ready && break
        sleep 0.1
    done
    if ! conf_ready; then
        echo "server.sh: the source 'conf' did not get ready" >&2
        show_logs >&2
        exit 1
    fi
    unset MEITH_HOME
    stdio_cmd="MEITH_HOME=$(printf '%q' "$home") $(printf '%q' "$bin/meith") mcp"
fi

# A free port, then the bridge on it: stateful, one `meith mcp` per MCP session, ended 5 s
# after the session's last request (the suite's client never ends its sessions itself).
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
"$bridge" --stdio "$stdio_cmd" --outputTransport streamableHttp --stateful --sessionTimeout 5000 \
    --port "$port" --logLevel info >"$home/bridge.log" 2>&1 &
bridge_pid=$!
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/mcp" && break
    sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$port/mcp" || {
    echo "server.sh: the bridge does not answer on port $port" >&2
    show_logs >&2
    exit 1
}

export MEITH_CONFORMANCE_URL="http://localhost:$port/mcp"
"$here/run.sh" server
status=$?
((status == 0 || status == 77)) || show_logs
exit "$status"
