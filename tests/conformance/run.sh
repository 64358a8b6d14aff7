#!/usr/bin/env bash
# The MCP project's conformance suite (@modelcontextprotocol/conformance, pinned in
# package.json) against meith: `run.sh client` runs every client scenario with meith as the
# client (meith_client.sh: a remote source, `meith login`, `meith tools`, `meith call`);
# `run.sh server` runs every server scenario against `meith mcp` (server.sh). Scenarios
# listed in expected-failures.yml must fail, every other one must pass. MEITH_BIN: the folder
# of meith, meithd and meith-remote. Exit 0 when all is as expected; 77 (skipped) when the
# suite is not installed (scripts/install-deps installs it).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="${1:?usage: run.sh client|server}"
suite="$here/node_modules/.bin/conformance"
node="$here/node_modules/.bin/node"
if [[ ! -x "$suite" || ! -x "$node" ]]; then
    echo "SKIPPED: the conformance suite is not installed (scripts/install-deps installs it into tests/conformance)"
    exit 77
fi
export PATH="$here/node_modules/.bin:$PATH" # Node 22 first: the suite needs it
work="$(mktemp -d "${TMPDIR:-/tmp}/meith-conformance.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"

scenarios=()
while read -r line; do
    [[ "$line" == "Client scenarios"* ]] && section=client && continue
    [[ "$line" == "Server scenarios"* ]] && section=server && continue
    [[ "$line" == "- "* && "${section:-}" == "$mode" ]] && scenarios+=("$(echo "${line#- }" | cut -d' ' -f1)")
done < <("$suite" list)
((${#scenarios[@]})) || { echo "run.sh: the suite lists no $mode scenarios" >&2; exit 1; }

failed=()
for s in "${scenarios[@]}"; do
    if [[ "$mode" == client ]]; then
        out="$("$suite" client --command "$here/meith_client.sh" --scenario "$s" \
            --expected-failures "$here/expected-failures.yml" --timeout 60000 2>&1)"
    else
        out="$("$suite" server --url "$MEITH_CONFORMANCE_URL" --scenario "$s" \
            --expected-failures "$here/expected-failures.yml" 2>&1)"
    fi
    status=$?
    summary="$(echo "$out" | grep -E "^Passed:|OVERALL|expected failure|stale" | tr '\n' ' ')"
    if ((status == 0)); then
        echo "ok      $s  $summary"
    else
        echo "FAILED  $s  $summary"
        echo "$out" | sed 's/^/    /' | tail -60
        failed+=("$s")
    fi
done
echo "$mode scenarios: ${#scenarios[@]}, unexpected results: ${#failed[@]} ${failed[*]}"
((${#failed[@]} == 0))
