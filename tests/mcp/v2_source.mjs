// v2_source.mjs: a 2.x SDK server (tests/mcp/v2_server.mjs, serveStdio) as a source that meithd
// speaks 2026-07-28 to, for tests/e2e/mcp_families_test.cpp (docs/protocol.md §17).
//
//   node v2_source.mjs MEITH HOME SERVER_JS
//     SERVER_JS is configured in meithd as source "v2" with prefix "v2_".
//
// A 1.x SDK client talks to the server directly (it answers in 2025-11-25) and through
// `meith mcp` (meithd speaks 2026-07-28 to it): tools, resources, prompts and the elicitation
// the server asks as input_required are compared field by field; resources/updated arrives
// through meith on the listen meithd keeps. A 2.x client pinned to 2026-07-28 then calls the
// same tools through meith: 2026-07-28 on both hops. Prints one JSON object.
import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Client2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as Stdio2 } from '@modelcontextprotocol/client/stdio';

const [meith, home, serverJs] = process.argv.slice(2);
const env = { ...process.env, MEITH_NO_AUTOSTART: '1' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function v1(command, args) {
    const seen = { elicitation: [], updated: [] };
    const client = new Client({ name: 'v2-source-agent', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
        seen.elicitation.push(req.params);
        return { action: 'accept', content: { ok: true } };
    });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => seen.updated.push(n.params));
    await client.connect(new StdioClientTransport({ command, args, env, stderr: 'inherit' }));
    return { client, seen };
}
/// What differs by design between the hops: resultType and the server info of 2026-07-28, and
/// the _meta of an elicitation sent as a server's request (its progress token).
function norm(v) {
    if (Array.isArray(v)) return v.map(norm);
    if (v && typeof v === 'object') {
        const out = {};
        for (const [k, x] of Object.entries(v)) {
            if (k === 'resultType' || k === 'ttlMs' || k === 'cacheScope' || k === '_meta') continue;
            out[k] = norm(x);
        }
        return out;
    }
    return v;
}
const checks = {};
const check = (name, a, b) => {
    const equal = isDeepStrictEqual(norm(a), norm(b));
    checks[name] = equal ? { equal } : { equal, direct: norm(a), meith: norm(b) };
};

const D = await v1(process.execPath, [serverJs]);
const M = await v1(meith, ['mcp', '--home', home]);
const byName = (a, b) => (a.name < b.name ? -1 : 1);
check('tools/list', (await D.client.listTools()).tools.sort(byName),
      (await M.client.listTools()).tools.filter((t) => t.name.startsWith('v2_'))
          .map((t) => ({ ...t, name: t.name.slice(3) })).sort(byName));
check('tools/call echo', await D.client.callTool({ name: 'echo', arguments: { text: 'hi' } }),
      await M.client.callTool({ name: 'v2_echo', arguments: { text: 'hi' } }));
check('resources/list', (await D.client.listResources()).resources, (await M.client.listResources()).resources);
check('resources/read', await D.client.readResource({ uri: 'info://hello' }),
      await M.client.readResource({ uri: 'info://hello' }));
check('prompts/list', (await D.client.listPrompts()).prompts,
      (await M.client.listPrompts()).prompts.map((p) => ({ ...p, name: p.name.slice(3) })));
check('prompts/get', await D.client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } }),
      await M.client.getPrompt({ name: 'v2_greet', arguments: { name: 'Ada' } }));
// The server's input_required: a real request to the direct client (the SDK's 2025 shim); an
// input request answered through meithd and `meith mcp` on the other hop.
check('tools/call confirm', await D.client.callTool({ name: 'confirm', arguments: { what: 'deploy' } }),
      await M.client.callTool({ name: 'v2_confirm', arguments: { what: 'deploy' } }));
check('elicitation request', D.seen.elicitation, M.seen.elicitation);

// resources/subscribe through meith: meithd subscribes on its listen; touch sends the update.
const extra = {};
await M.client.subscribeResource({ uri: 'info://hello' });
await M.client.callTool({ name: 'v2_touch', arguments: {} });
for (let i = 0; i < 250 && M.seen.updated.length === 0; i++) await sleep(20);
extra.updated = M.seen.updated;
await D.client.close();
await M.client.close();

// A 2.x client in 2026-07-28 through meith, to the source meithd speaks 2026-07-28 to.
const asked = [];
const c2 = new Client2({ name: 'v2-modern-agent', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
c2.setRequestHandler('elicitation/create', async (req) => { asked.push(req.params); return { action: 'accept', content: { ok: false } }; });
const heard = [];
c2.setNotificationHandler('notifications/resources/updated', (n) => heard.push(n.params));
await c2.connect(new Stdio2({ command: meith, args: ['mcp', '--home', home], env, stderr: 'inherit' }));
extra.modern = {
    era: c2.getProtocolEra(),
    echo: await c2.callTool({ name: 'v2_echo', arguments: { text: 'modern' } }),
    confirm: await c2.callTool({ name: 'v2_confirm', arguments: { what: 'ship' } }),
    asked,
};
// subscriptions/listen through meith mcp: acknowledged, and the update arrives on it.
const sub = await c2.listen({ resourceSubscriptions: ['info://hello'] });
extra.modern.honored = sub.honoredFilter;
await c2.callTool({ name: 'v2_touch', arguments: {} });
for (let i = 0; i < 250 && heard.length === 0; i++) await sleep(20);
extra.modern.heard = heard;
await sub.close();
await c2.close();
console.log(JSON.stringify({ checks, extra }));
process.exit(0);
