#!/usr/bin/env bash
# The tool templates as an author uses them: each copied to a fresh folder, its dependency on
# the SDK pointed at this tree, and its own tests run (pytest; npm install --offline + npm test).
#   tests/packaging/templates_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
fail() { echo "templates_test: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/meith-templates-XXXXXX)
trap 'rm -rf "$work"' EXIT

cp -r "$src/sdk/python/template" "$work/py"
(cd "$work/py" && PYTHONPATH="$src/sdk/python/src:$work/py" /usr/bin/python3 -m pytest -q -p no:cacheprovider) ||
  fail "the Python template's tests failed"

cp -r "$src/sdk/node/template" "$work/js"
cd "$work/js"
node -e "const f='package.json', p=JSON.parse(require('fs').readFileSync(f)); p.dependencies.meith='file:$src/sdk/node'; require('fs').writeFileSync(f, JSON.stringify(p))"
npm install --offline --no-audit --no-fund >"$work/npm.log" 2>&1 || { cat "$work/npm.log" >&2; fail "npm install in the Node template failed"; }
npm test >"$work/test.log" 2>&1 || { cat "$work/test.log" >&2; fail "the Node template's tests failed"; }
echo "templates_test: ok"
