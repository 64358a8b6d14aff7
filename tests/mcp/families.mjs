// families.mjs: every MCP family through `meith mcp`, checked field by field against the same
// client talking to the same server directly (tests/e2e/mcp_families_test.cpp,
// docs/protocol.md §17).
//
//   node families.mjs SDK MEITH HOME SERVER_JS [ROOTS_JS]
//     SDK  v1: the 1.x SDK's Client (2025-11-25);
//          v2: the 2.x Client — pinned to 2026-07-28 towards `meith mcp`, in its default
//              (initialize) mode towards the server, which speaks 2025-11-25 only.
//     SERVER_JS: @modelcontextprotocol/server-everything, configured in meithd as source
//     "everything" with prefix "ev_"; ROOTS_JS: tests/mcp/roots_server.mjs as source "roots"
//     with prefix "rt_" (v1 only).
//
// Prints one JSON object: {checks: {NAME: {equal, direct?, meith?}}, extra: {...}}; each check
// compares what the direct session saw with what the session through meith saw, after
// masking only what differs by design (times in the server's texts, the prompt/tool prefix,
// and in 2026-07-28 the revision's own result members).
import { isDeepStrictEqual } from 'node:util';

const [sdk, meith, home, serverJs, rootsJs] = process.argv.slice(2);
const NM = new URL('./node_modules/', import.meta.url).pathname;

const v1 = sdk === 'v1';
let Client, StdioClientTransport, schemas;
if (v1) {
    ({ Client } = await import(`${NM}@modelcontextprotocol/sdk/dist/esm/client/index.js`));
    ({ StdioClientTransport } = await import(`${NM}@modelcontextprotocol/sdk/dist/esm/client/stdio.js`));
    schemas = await import(`${NM}@modelcontextprotocol/sdk/dist/esm/types.js`);
} else {
    ({ Client } = await import(`${NM}@modelcontextprotocol/client/dist/index.mjs`));
    ({ StdioClientTransport } = await import(`${NM}@modelcontextprotocol/client/dist/stdio.mjs`));
}

const caps = { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const withTimeout = (p, ms, what) =>
    Promise.race([p, new Promise((_, no) => setTimeout(() => no(new Error(`timeout: ${what}`)), ms))]);

/// A session: a client with handlers that record what the server asked and answer the same.
async function session(command, args, { modern = false, capabilities = caps, name = 'families-agent' } = {}) {
    const seen = { sampling: [], elicitation: [], roots: 0, notes: [] };
    const options = { capabilities };
    if (modern) options.versionNegotiation = { mode: { pin: '2026-07-28' } };
    const client = new Client({ name, version: '1.0.0' }, options);
    const on = (method, schema, fn) => {
        if (!capabilities[method.split('/')[0]]) return; // only what the client declares
        v1 ? client.setRequestHandler(schema, fn) : client.setRequestHandler(method, fn);
    };
    on('sampling/createMessage', schemas?.CreateMessageRequestSchema, async (req) => {
        seen.sampling.push(req.params);
        return { model: 'test-model', stopReason: 'endTurn', role: 'assistant',
                 content: { type: 'text', text: 'sampled: ' + req.params.messages[0].content.text } };
    });
    on('elicitation/create', schemas?.ElicitRequestSchema, async (req) => {
        seen.elicitation.push(req.params);
        return req.params.mode === 'url' ? { action: 'accept' }
                                         : { action: 'accept', content: { name: 'Ada', check: true, integer: 7 } };
    });
    on('roots/list', schemas?.ListRootsRequestSchema, async () => {
        seen.roots++;
        return { roots: [{ uri: 'file:///tmp/root-a', name: 'Root A' }] };
    });
    const note = (method, schema) => {
        const fn = (n) => seen.notes.push({ method, params: n.params ?? {} });
        v1 ? client.setNotificationHandler(schema, fn) : client.setNotificationHandler(method, fn);
    };
    note('notifications/message', schemas?.LoggingMessageNotificationSchema);
    note('notifications/resources/updated', schemas?.ResourceUpdatedNotificationSchema);
    note('notifications/resources/list_changed', schemas?.ResourceListChangedNotificationSchema);
    const transport = new StdioClientTransport({ command, args, stderr: 'inherit',
                                                 env: { ...process.env, MEITH_NO_AUTOSTART: '1' } });
    await withTimeout(client.connect(transport), 30000, `connect ${command}`);
    return { client, seen };
}

const checks = {};
const extra = {};
/// Time of day in the server's texts ("created at 12:11:01 AM") differs between two reads.
const maskTimes = (s) => s.replace(/\d{1,2}:\d{2}:\d{2}\s?[AP]M/g, '<time>').replace(/\d{1,2}:\d{2}:\d{2}/g, '<time>');
/// Members 2026-07-28 leaves out by design (the SDK's 2026 codec drops them): a Tool's
/// `execution` (tasks are an extension there) and a URL elicitation's `elicitationId`.
const notIn2026 = v1 ? new Set() : new Set(['execution', 'elicitationId']);
/// Normalises what differs by design: times (also inside base64 blobs), the 2026 members.
function norm(v) {
    if (typeof v === 'string') return maskTimes(v);
    if (Array.isArray(v)) return v.map(norm);
    if (v && typeof v === 'object') {
        const out = {};
        for (const [k, x] of Object.entries(v)) {
            if (k === 'resultType' || k === 'ttlMs' || k === 'cacheScope' || notIn2026.has(k)) continue;
            if (k === 'blob' && typeof x === 'string') {
                out[k] = maskTimes(Buffer.from(x, 'base64').toString('latin1'));
                continue;
            }
            if (k === '_meta' && x && typeof x === 'object') {
                const m = { ...x };
                delete m['io.modelcontextprotocol/serverInfo'];
                delete m['io.modelcontextprotocol/related-task']; // each side's own task id
                if (Object.keys(m).length) out[k] = norm(m);
                continue;
            }
            out[k] = norm(x);
        }
        return out;
    }
    return v;
}
function check(name, direct, through) {
    const a = norm(direct), b = norm(through);
    const equal = isDeepStrictEqual(a, b);
    checks[name] = equal ? { equal } : { equal, direct: a, meith: b };
}
async function outcome(p) {
    try {
        return { result: await p };
    } catch (e) {
        return { error: { code: e.code, message: String(e.message).replace(/^MCP error -?\d+: /, '') } };
    }
}
async function allPages(fn, key) {
    const items = [];
    let cursor;
    do {
        const r = await fn(cursor ? { cursor } : {});
        items.push(...r[key]);
        cursor = r.nextCursor;
    } while (cursor);
    return items;
}
const strip = (name) => name.replace(/^ev_/, '');
const waitFor = async (pred, ms, what) => {
    const end = Date.now() + ms;
    while (!pred()) {
        if (Date.now() > end) throw new Error(`timeout: ${what}`);
        await sleep(20);
    }
};

const node = process.execPath;
const direct = await session(node, [serverJs, 'stdio']);
const meithArgs = ['mcp', '--home', home];
const through = await session(meith, meithArgs, { modern: !v1 });
extra.era = v1 ? 'legacy' : through.client.getProtocolEra?.();
extra.version = v1 ? '2025-11-25' : through.client.getNegotiatedProtocolVersion?.();
const D = direct.client, M = through.client;

// ---- tools/list: every field of every tool, verbatim --------------------------------------
const dTools = await allPages((p) => D.listTools(p), 'tools');
const mTools = (await allPages((p) => M.listTools(p), 'tools')).filter((t) => t.name.startsWith('ev_'));
extra.toolCount = dTools.length;
// meith lists its registry in name order; each tool is compared by name, member by member.
const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
check('tools/list', [...dTools].sort(byName), mTools.map((t) => ({ ...t, name: strip(t.name) })).sort(byName));

// ---- resources ---------------------------------------------------------------------------
check('resources/list', await allPages((p) => D.listResources(p), 'resources'),
      await allPages((p) => M.listResources(p), 'resources'));
check('resources/templates/list', await allPages((p) => D.listResourceTemplates(p), 'resourceTemplates'),
      await allPages((p) => M.listResourceTemplates(p), 'resourceTemplates'));
for (const uri of ['demo://resource/static/document/instructions.md', 'demo://resource/dynamic/text/2',
                   'demo://resource/dynamic/blob/1', 'demo://resource/dynamic/text/abc'])
    check(`resources/read ${uri}`, await outcome(D.readResource({ uri })), await outcome(M.readResource({ uri })));

// ---- prompts -----------------------------------------------------------------------------
const dPrompts = await allPages((p) => D.listPrompts(p), 'prompts');
const mPrompts = await allPages((p) => M.listPrompts(p), 'prompts');
check('prompts/list', dPrompts, mPrompts.map((p) => ({ ...p, name: strip(p.name) })));
const gets = [['simple-prompt', {}], ['args-prompt', { city: 'Paris', state: 'TX' }],
              ['completable-prompt', { department: 'Engineering', name: 'Alice' }],
              ['resource-prompt', { resourceType: 'Text', resourceId: '3' }], ['args-prompt', {}]];
for (const [name, args] of gets)
    check(`prompts/get ${name} ${JSON.stringify(args)}`, await outcome(D.getPrompt({ name, arguments: args })),
          await outcome(M.getPrompt({ name: 'ev_' + name, arguments: args })));

// ---- completion/complete (routed by the prompt or the template it names) -----------------
const completions = [
    [{ type: 'ref/prompt', name: 'completable-prompt' }, { name: 'department', value: 'S' }],
    [{ type: 'ref/prompt', name: 'completable-prompt' }, { name: 'name', value: '' }, { arguments: { department: 'Sales' } }],
    [{ type: 'ref/prompt', name: 'resource-prompt' }, { name: 'resourceType', value: 'B' }],
    [{ type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' }, { name: 'resourceId', value: '12' }],
];
for (const [ref, argument, context] of completions) {
    const params = (r) => ({ ref: r, argument, ...(context ? { context } : {}) });
    const mRef = ref.type === 'ref/prompt' ? { ...ref, name: 'ev_' + ref.name } : ref;
    check(`completion/complete ${JSON.stringify(ref)} ${argument.name}`, await outcome(D.complete(params(ref))),
          await outcome(M.complete(params(mRef))));
}

// ---- tools/call: content types, annotations, structuredContent, isError, progress ---------
const calls = [['echo', { message: 'hi' }], ['get-sum', { a: 1, b: 2 }], ['get-tiny-image', {}],
               ['get-annotated-message', { messageType: 'error', includeImage: true }],
               ['get-resource-links', { count: 2 }], ['get-resource-reference', { resourceType: 'Text', resourceId: 1 }],
               ['get-structured-content', { location: 'New York' }],
               ['gzip-file-as-resource', { name: 'a.gz', data: 'data:text/plain;base64,aGVsbG8=', outputType: 'resourceLink' }]];
for (const [name, args] of calls)
    check(`tools/call ${name} ${JSON.stringify(args)}`, await outcome(D.callTool({ name, arguments: args })),
          await outcome(M.callTool({ name: 'ev_' + name, arguments: args })));
// gzip-file-as-resource registered a resource: the server said so, and a 2025-11-25 client
// hears it (2026-07-28 sends list changes only on a listen).
if (v1) {
    const listChanged = (s) => s.seen.notes.filter((n) => n.method === 'notifications/resources/list_changed');
    await waitFor(() => listChanged(direct).length && listChanged(through).length, 10000, 'resources/list_changed');
    check('notifications/resources/list_changed', listChanged(direct)[0], listChanged(through)[0]);
}
check('resources/list after list_changed', await allPages((p) => D.listResources(p), 'resources'),
      await allPages((p) => M.listResources(p), 'resources'));
const progress = { d: [], m: [] };
const lr = { duration: 0.3, steps: 3 };
check('tools/call trigger-long-running-operation',
      await outcome(D.callTool({ name: 'trigger-long-running-operation', arguments: lr }, undefined,
                               { onprogress: (p) => progress.d.push(p) })),
      await outcome(M.callTool({ name: 'ev_trigger-long-running-operation', arguments: lr }, undefined,
                               { onprogress: (p) => progress.m.push(p) })));
// The server sends 3; the SDK may drop the last one when the result overtakes its dispatch (on
// either session), so the notifications both sessions saw are compared.
extra.progressThroughMeith = progress.m;
const seenByBoth = Math.min(progress.d.length, progress.m.length);
check('notifications/progress', progress.d.slice(0, seenByBoth), progress.m.slice(0, seenByBoth));
// meithd checks arguments against the inputSchema before the server sees them (§4).
extra.invalidArguments = await outcome(M.callTool({ name: 'ev_get-sum', arguments: { a: 'x' } }));

// ---- server → client: sampling, elicitation (form, url) ----------------------------------
const askers = [['trigger-sampling-request', { prompt: 'hi', maxTokens: 20 }, 'sampling'],
                ['trigger-elicitation-request', {}, 'elicitation'],
                ['trigger-url-elicitation', { url: 'https://example.com/auth', elicitationId: 'e-1' }, 'elicitation']];
for (const [name, args, kind] of askers) {
    const before = { d: direct.seen[kind].length, m: through.seen[kind].length };
    check(`tools/call ${name}`, await outcome(D.callTool({ name, arguments: args })),
          await outcome(M.callTool({ name: 'ev_' + name, arguments: args })));
    check(`${kind} request of ${name}`, direct.seen[kind].slice(before.d), through.seen[kind].slice(before.m));
}

if (v1) {
    // ---- tasks: a tool that runs only as a task (2025-11-25 basic/utilities/tasks) --------
    const runTask = async (client, name) => {
        const seen = [];
        for await (const m of client.experimental.tasks.callToolStream({ name, arguments: { topic: 'otters' } }))
            seen.push(m.type === 'result' ? { type: 'result', result: m.result }
                      : m.type === 'error' ? { type: 'error', message: String(m.error?.message) }
                      : { type: m.type, status: m.task?.status });
        return seen;
    };
    const [dTask, mTask] = await Promise.all([runTask(D, 'simulate-research-query'),
                                              runTask(M, 'ev_simulate-research-query')]);
    const last = (s) => s[s.length - 1];
    check('tasks: tools/call as a task, its result', last(dTask), last(mTask));
    extra.taskMessages = mTask.map((m) => m.type + (m.status ? ':' + m.status : ''));

    // ---- logging and resource subscriptions (2025-11-25) ---------------------------------
    await D.setLoggingLevel('debug');
    await M.setLoggingLevel('debug');
    const uri = 'demo://resource/dynamic/text/1';
    const mark = { d: direct.seen.notes.length, m: through.seen.notes.length };
    await D.subscribeResource({ uri });
    await M.subscribeResource({ uri });
    await D.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await M.callTool({ name: 'ev_toggle-subscriber-updates', arguments: {} });
    const updated = (s, from) => s.seen.notes.slice(from).filter((n) => n.method === 'notifications/resources/updated');
    await waitFor(() => updated(direct, mark.d).length && updated(through, mark.m).length, 15000, 'resources/updated');
    await D.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await M.callTool({ name: 'ev_toggle-subscriber-updates', arguments: {} });
    await D.unsubscribeResource({ uri });
    await M.unsubscribeResource({ uri });
    check('notifications/resources/updated', updated(direct, mark.d)[0], updated(through, mark.m)[0]);
    const subscribeLog = (s, from) => s.seen.notes.slice(from).find((n) => n.method === 'notifications/message' &&
                                                                           String(n.params.data).startsWith('Received Subscribe'));
    check('notifications/message', subscribeLog(direct, mark.d), subscribeLog(through, mark.m));

    // ---- roots: asked during a call, answered by the client that made it ----------------
    if (rootsJs) {
        const r = await session(node, [rootsJs]);
        check('roots/list during tools/call', await outcome(r.client.callTool({ name: 'roots', arguments: {} })),
              await outcome(M.callTool({ name: 'rt_roots', arguments: {} })));
        await r.client.close();
    }

    // ---- a client without the capabilities: the documented refusal ----------------------
    const bare = await session(meith, meithArgs, { capabilities: {}, name: 'bare-agent' });
    extra.bareSampling = await outcome(bare.client.callTool({ name: 'ev_trigger-sampling-request', arguments: { prompt: 'x' } }));
    await bare.client.close();
}

await D.close();
await M.close();
console.log(JSON.stringify({ checks, extra }));
process.exit(0);
