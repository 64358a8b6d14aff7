#!/usr/bin/env bash
# The Node.js SDK as a user installs it: `npm pack` of sdk/node, installed from the tarball
# into a clean folder (offline: it has no dependencies), its types checked with tsc --strict,
# then a tool host on the installed meith/tool-host under the real meithd, called with the
# installed meith/client.
#   tests/packaging/node_pack_test.sh SOURCE_DIR MEITHD
set -euo pipefail
src=$(cd "$1" && pwd)
meithd=$(realpath "$2")
fail() { echo "node_pack_test: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/meith-npm-XXXXXX)
# Never `kill 0` (the whole process group, ctest included) when no daemon was started.
# The daemon is waited for before its home is removed: it still writes there while it stops.
trap '[[ -n "${daemon:-}" ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "$src/sdk/node" >"$work/pack.log" 2>&1) ||
  { cat "$work/pack.log" >&2; fail "npm pack failed"; }
tarball=$(ls "$work"/meith-*.tgz) || fail "no tarball"
# (Listed first: `tar | grep -q` under pipefail fails when grep stops reading early.)
listing=$(tar -tzf "$tarball")
grep -q "package/src/client.d.ts" <<<"$listing" || fail "the tarball lacks the type definitions"
if grep -q "package/test/" <<<"$listing"; then fail "the tarball ships the tests"; fi
mkdir "$work/app" && cd "$work/app"
echo '{"name":"app","private":true,"type":"module"}' >package.json
npm install --offline --no-audit --no-fund "$tarball" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "npm install of the tarball failed"; }

# The types, as a TypeScript user meets them.
cat >check.ts <<'TS'
import { connect, errors, type ToolResult } from 'meith/client';
import { runToolHost, ToolError, type FunctionTool } from 'meith/tool-host';
const tool: FunctionTool = { name: 't', description: 'd', capabilities: ['read-only'], run: (a: { x: number }) => a.x };
export async function use(): Promise<ToolResult> {
  const c = await connect({ caller: 'plugin' });
  try { return await c.call('t', { x: 1 }, { timeoutMs: 10 }); }
  catch (e) { if (e instanceof errors.Timeout) throw new ToolError('late'); throw e; }
}
export const start = () => runToolHost({ tools: [tool] });
TS
tsc="$src/tests/providers/node_modules/.bin/tsc"
[[ -x "$tsc" ]] || fail "$tsc is missing; run scripts/install-deps"
"$tsc" --noEmit --strict --skipLibCheck --target es2022 --module nodenext --moduleResolution nodenext check.ts ||
  fail "the package's types do not check"

cat >host.mjs <<'JS'
import { runToolHost } from 'meith/tool-host';
runToolHost({ tools: [{ name: 'hello', description: 'Says hello', capabilities: ['read-only'],
  parameters: { type: 'object', properties: { to: { type: 'string' } } },
  run: ({ to = 'world' }) => `hello, ${to}` }] });
JS
mkdir -m 700 "$work/home"
printf '[[sources]]\nname = "js"\nkind = "host"\ncommand = ["node", "%s/app/host.mjs"]\n' "$work" >"$work/home/meithd.toml"
env -u XDG_RUNTIME_DIR "$meithd" --home "$work/home" --socket "$work/home/d.sock" >"$work/meithd.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do [[ -f "$work/home/config.json" ]] && break; sleep 0.05; done
out=$(MEITH_HOME="$work/home" node --input-type=module -e "
import { connect } from 'meith/client';
const c = await connect();
console.log((await c.call('hello', { to: 'npm' })).content);
c.close();
") || { cat "$work/meithd.log" >&2; fail "calling the host on the installed package failed"; }
[[ "$out" == "hello, npm" ]] || fail "unexpected answer: $out"
echo "node_pack_test: ok"
