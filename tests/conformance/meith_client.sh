#!/usr/bin/env bash
# meith as the MCP client of a conformance scenario: the suite runs this with the scenario's
# server URL as the last argument and the scenario's name (and context: pre-registered
# credentials, keys) in MCP_CONFORMANCE_SCENARIO / MCP_CONFORMANCE_CONTEXT.
#
# What a user does, in a fresh home: the server as a remote source in meithd.toml, the
# scenario's client secret or key kept with `meith secret set`, meithd started, `meith login`
# when the source asks for one (the browser step is tests/conformance/browser.sh), then
# `meith tools` and `meith call` of the scenario's tool. meith (which starts meithd, found
# beside it, with meith-remote) comes from MEITH_BIN (a build's bin folder).
set -uo pipefail
url="${*: -1}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the suite sets MCP_CONFORMANCE_SCENARIO}"
context="${MCP_CONFORMANCE_CONTEXT:-{\}}"
bin="${MEITH_BIN:?MEITH_BIN: the folder of meithd, meith and meith-remote}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="$(mktemp -d "${TMPDIR:-/tmp}/meith-conf.XXXXXX")"
export MEITH_HOME="$home" MEITH_SECRET_SERVICE=off BROWSER="$here/browser.sh"
meith() { "$bin/meith" "$@"; }
ctx() { node -e 'const c=JSON.parse(process.argv[1]); process.stdout.write(String(c[process.argv[2]] ?? ""))' "$context" "$1"; }

cleanup() {
    meith stop >/dev/null 2>&1
    rm -rf "$home"
}
trap cleanup EXIT

# The source: the scenario's context decides its oauth table (secrets go to the store).
fields=()
[[ -n "$(ctx client_id)" ]] && fields+=("client_id = \"$(ctx client_id)\"")
keep() { # keep KEY CONTEXT_MEMBER: the value in the secret store, the key naming it
    ctx "$2" | meith secret set "conf_$1" >/dev/null || exit 1
    fields+=("$1 = \"\${secret:conf_$1}\"")
}
[[ -n "$(ctx client_secret)" ]] && keep client_secret client_secret
[[ -n "$(ctx private_key_pem)" ]] && keep private_key private_key_pem
if [[ -n "$(ctx idp_id_token)" ]]; then
    keep id_token idp_id_token
    fields+=("idp_token_endpoint = \"$(ctx idp_token_endpoint)\"" "idp_client_id = \"$(ctx idp_client_id)\"")
fi
# A client ID metadata document (an https URL naming meith's redirect URIs) is the user's to
# publish; where the server takes them, the user names theirs as the client_id.
[[ "$scenario" == auth/basic-cimd ]] &&
    fields+=('client_id = "https://conformance-test.local/client-metadata.json"')
oauth=""
if ((${#fields[@]})); then
    oauth="oauth = { $(IFS=,; echo "${fields[*]}") }"
fi
cat >"$home/meithd.toml" <<EOF
[[sources]]
name = "conf"
kind = "mcp"
url = "$url"
allow_private_network = true
$oauth

# The scenarios' servers declare nothing of their tools; the user trusts them to be called.
[[permissions.rules]]
tool = "*"
decision = "allow"
EOF

# The first command starts meithd (auto-start, HOME/meithd.toml), which is ready once its
# sources settled. A source that waits for a login says so; then log in as a person would.
if meith sources conf --json 2>&1 | grep -q 'run `meith login conf`'; then
    echo "== meith login conf"
    meith login conf --timeout-ms 20000 || { cat "$home/meithd.log" >&2; exit 1; }
fi

case "$scenario" in
    tools_call) calls=("add_numbers" '{"a":5,"b":3}') ;;
    sse-retry) calls=("test_reconnection" '{}') ;;
    initialize) calls=() ;;
    elicitation-sep1034-client-defaults) calls=("test_client_elicitation_defaults" '{}') ;;
    *) calls=("test-tool" '{}') ;;
esac
echo "== meith tools"
meith tools || { cat "$home/meithd.log" >&2; exit 1; }
status=0
for ((i = 0; i < ${#calls[@]}; i += 2)); do
    # A call the server refuses for want of a scope says to log in again (a step-up); a
    # person does, and calls again. meith bounds the logins; this loop only stops a runaway.
    for attempt in 1 2 3 4 5; do
        echo "== meith call ${calls[i]}"
        if meith call "${calls[i]}" "${calls[i + 1]}" 2>"$home/call.err"; then
            break
        fi
        cat "$home/call.err" >&2
        if grep -q "insufficient_scope" "$home/call.err" &&
            ! meith sources conf | grep -q "step-up:     the server asks for the scope"; then
            echo "meith sources conf does not show the step-up the call met" >&2
            status=1
            break
        fi
        if grep -q "run \`meith login conf\`" "$home/call.err" && ((attempt < 5)); then
            echo "== meith login conf (step-up)"
            meith login conf --timeout-ms 20000 || { status=1; break; }
            continue
        fi
        status=1
        break
    done
done
((status == 0)) || cat "$home/meithd.log" >&2
exit $status
