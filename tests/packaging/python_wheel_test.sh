#!/usr/bin/env bash
# The Python SDK as a user installs it: a wheel built offline (pip wheel --no-build-isolation,
# Debian's setuptools and wheel), installed into a clean virtualenv with no index, then a tool
# plugin served by the installed meith_tools under the real meithd and called with the
# installed meith client.
#   tests/packaging/python_wheel_test.sh SOURCE_DIR MEITHD
set -euo pipefail
src=$(cd "$1" && pwd)
meithd=$(realpath "$2")
py=/usr/bin/python3
fail() { echo "python_wheel_test: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/meith-wheel-XXXXXX)
# Never `kill 0` (the whole process group, ctest included) when no daemon was started.
# The daemon is waited for before its home is removed: it still writes there while it stops.
trap '[[ -n "${daemon:-}" ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT

cp -r "$src/sdk/python" "$work/sdk"   # the build writes build/ and *.egg-info next to it
rm -rf "$work/sdk/tests"
"$py" -m pip wheel --quiet --no-build-isolation --no-deps --no-index -w "$work/dist" "$work/sdk" \
  >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "pip wheel failed"; }
wheel=$(ls "$work"/dist/meith-*.whl) || fail "no wheel built"
echo "python_wheel_test: built $(basename "$wheel")"
"$py" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-index "$wheel" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "pip install of the wheel failed"; }

cd "$work"   # nothing of the source tree on sys.path from here
"$work/venv/bin/python" -c "import meith, meith_tools; assert meith.__version__ == meith_tools.__version__" ||
  fail "the installed packages do not import"
usage=$("$work/venv/bin/meith-tools" --help 2>&1) || fail "meith-tools --help failed: $usage"
grep -q "MODULE:CLASS" <<<"$usage" || fail "the meith-tools script does not run: $usage"

mkdir -m 700 "$work/home"
cat >"$work/hello_tool.py" <<'PY'
from meith_tools import ToolPlugin

class Hello(ToolPlugin):
    name = "hello"
    def get_tool_schemas(self, state):
        return [{"type": "function", "function": {"name": "hello", "description": "Says hello",
                 "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}},
                 "capabilities": ["read-only"]}]
    def execute_tool(self, tool_name, payload, state, **_):
        return {"success": True, "result": f"hello, {payload.get('to', 'world')}"}
PY
cat >"$work/home/meithd.toml" <<TOML
[[sources]]
name = "py"
kind = "host"
command = ["$work/venv/bin/python", "-m", "meith_tools", "hello_tool:Hello"]
cwd = "$work"
TOML
env -u XDG_RUNTIME_DIR "$meithd" --home "$work/home" --socket "$work/home/d.sock" >"$work/meithd.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do [[ -f "$work/home/config.json" ]] && break; sleep 0.05; done
out=$("$work/venv/bin/python" -c "
import meith
with meith.SyncClient(home='$work/home') as c:
    print(c.call('hello', {'to': 'wheel'}).content)
") || { cat "$work/meithd.log" >&2; fail "calling the installed plugin failed"; }
[[ "$out" == "hello, wheel" ]] || fail "unexpected answer: $out"
echo "python_wheel_test: ok"
