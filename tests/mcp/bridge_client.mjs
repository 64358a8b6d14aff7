// bridge_client.mjs: drives `meith mcp` the way an MCP client does, for tests/e2e/mcp_bridge_test.cpp.
//
//   node bridge_client.mjs sdk MEITH HOME NEW_CONFIG   the official TypeScript SDK's Client over
//       StdioClientTransport: initialize, tools/list, tools/call (echo, a streaming tool with
//       progress, a denied tool, an unknown tool, 20 calls at once), cancel via AbortSignal,
//       and notifications/tools/list_changed after NEW_CONFIG is reloaded into the daemon.
//   node bridge_client.mjs oversized MEITH ARGS...     a 65 MiB request, then a ping
//   node bridge_client.mjs raw MEITH ARGS...           JSON-RPC lines written by hand: malformed
//       JSON, an unknown method, a cancel for a finished request, ping; then stdin is closed.
//   node bridge_client.mjs typed MEITH ARGS...         members of unexpected types ("jsonrpc":2,
//       null, a numeric protocolVersion, a numeric clientInfo.name, a numeric text input), a
//       tools/call whose string id is 200 bytes of two-byte characters, then a ping.
//   node bridge_client.mjs search MEITH HOME            the SDK's Client over `meith mcp --search`:
//       tools/list (the two meta-tools), search_tools for fixed queries, call_tool of the first
//       match, search_tools for a tool the caller may not call, a bad search_tools call.
//   node bridge_client.mjs held MEITH HOME              the SDK's Client (named "held-agent")
//       calls `echo`, which the daemon holds for an approver nobody answers: the progress it
//       hears while held, and the result when the call's timeout ends it.
//   node bridge_client.mjs profile MEITH HOME NAME ARGS...   the SDK's Client named NAME over
//       `meith mcp ARGS...` (a client profile, docs/protocol.md §23): tools/list, a call of each
//       tool named in $CALLS (comma-separated, arguments {"text":"one two"}), and in search mode
//       search_tools for $QUERY and call_tool of each name in $VIA_CALL_TOOL.
//   node bridge_client.mjs calls MEITH HOME             the SDK's Client over `meith mcp`: tools/list,
//       then each call of $CALLS_JSON ([{name, arguments}]) in turn: isError and its text.
//   node bridge_client.mjs pair MEITH HOME URL_A URL_B  two SDK clients on a per-session Playwright
//       source: their pages, a browser_close of one, and what is left of it after it disconnects.
//   node bridge_client.mjs roots MEITH HOME             two SDK clients with roots of their own call
//       server-everything's get-roots-list on a per-session source: what each was shown.
//   node bridge_client.mjs pages MEITH HOME ARGS...     the SDK's Client over `meith mcp ARGS...`
//       lists every tool page by page (nextCursor); the names go one a line to $NAMES_FILE.
//
// Prints one JSON object with what it saw; the C++ test asserts on it.
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const [mode, meith, ...rest] = process.argv.slice(2);
const withTimeout = (p, ms, what) =>
    Promise.race([p, new Promise((_, no) => setTimeout(() => no(new Error(`timeout: ${what}`)), ms))]);

async function sdk(home, newConfig) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home], stderr: 'inherit' });
    const client = new Client({ name: 'sdk-test-agent', version: '1.0.0' });
    let listChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanged++; });
    await client.connect(transport);
    const out = {};
    out.serverVersion = client.getServerVersion();
    out.capabilities = client.getServerCapabilities();
    out.tools = (await client.listTools()).tools;
    out.echo = await client.callTool({ name: 'echo', arguments: { hello: 'mcp' } });
    // A text-payload tool: listed with one string `input`, called with it.
    out.custom = await client.callTool({ name: 't_custom', arguments: { input: 'free\nform' } });
    const progress = [];
    out.stream = await client.callTool({ name: 't_stream', arguments: { n: 3, interval_ms: 5 } }, undefined,
        { onprogress: (p) => progress.push(p) });
    out.progress = progress;
    out.denied = await client.callTool({ name: 't_write', arguments: {} });
    try {
        await client.callTool({ name: 'no_such_tool', arguments: {} });
        out.unknown = null;
    } catch (e) {
        out.unknown = { code: e.code, message: e.message };
    }
    const many = await Promise.all(
        Array.from({ length: 20 }, (_, i) => client.callTool({ name: 't_echo', arguments: { i } })));
    out.many = many.map((r) => r.structuredContent?.i ?? null);
    const abort = new AbortController();
    const started = Date.now();
    const slow = client.callTool({ name: 't_sleep', arguments: { ms: 5000 } }, undefined, { signal: abort.signal });
    setTimeout(() => abort.abort('the test cancels'), 200);
    try {
        await slow;
        out.cancel = { rejected: false };
    } catch (e) {
        out.cancel = { rejected: true, ms: Date.now() - started };
    }
    // After a cancel the bridge still serves.
    out.afterCancel = await client.callTool({ name: 'echo', arguments: { after: 'cancel' } });
    // A reload that adds a tool: the client hears list_changed and sees the tool.
    copyFileSync(newConfig, join(home, 'meithd.toml'));
    execFileSync(meith, ['reload', '--home', home], { stdio: 'ignore' });
    const deadline = Date.now() + 10000;
    while (listChanged === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    out.listChanged = listChanged;
    // The reload restarts the host; wait until its tools are back.
    let names = [];
    while (Date.now() < deadline) {
        names = (await client.listTools()).tools.map((t) => t.name);
        if (names.includes('extra_t_echo')) break;
        await new Promise((r) => setTimeout(r, 50));
    }
    out.toolsAfterReload = names;
    await client.close();
    return out;
}

// One `meith mcp` child and its stdout as a queue of parsed lines.
function bridge(args) {
    const child = spawn(meith, ['mcp', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const got = [];
    const waiting = [];
    lines.on('line', (l) => {
        got.push(l);
        waiting.splice(0).forEach((w) => w());
    });
    const next = () => withTimeout(new Promise((res) => {
        const take = () => (got.length ? res(JSON.parse(got.shift())) : waiting.push(take));
        take();
    }), 10000, 'an answer from meith mcp');
    const send = (s) => child.stdin.write(s + '\n');
    const exit = async () => {
        child.stdin.end();
        return withTimeout(new Promise((res) => child.on('exit', (code) => res(code))), 10000, 'exit');
    };
    return { next, send, exit };
}

async function raw(args) {
    const { next, send, exit } = bridge(args);
    const out = {};
    send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }));
    out.initialize = await next();
    send('{"jsonrpc":"2.0","id":2,"method":');
    out.malformed = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'no/such-method', params: {} }));
    out.unknownMethod = await next();
    send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }));
    send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }));
    out.ping = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list', params: {} }));
    out.toolsList = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/list', params: { cursor: 'x' } }));
    out.badCursor = await next();
    out.exitCode = await exit();
    return out;
}

async function typed(args) {
    const { next, send, exit } = bridge(args);
    const out = {};
    send('{"jsonrpc":2,"id":1,"method":"ping"}');
    out.numericJsonrpc = await next();
    send('{"jsonrpc":null,"id":2,"method":"ping"}');
    out.nullJsonrpc = await next();
    send('{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":5,"capabilities":{}}}');
    out.numericVersion = await next();
    send('{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":7}}}');
    out.numericClientName = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'typed', version: '0' } } }));
    out.initialize = await next();
    out.longId = 'é'.repeat(100); // 200 bytes: the requestId is cut inside the id
    send(JSON.stringify({ jsonrpc: '2.0', id: out.longId, method: 'tools/call',
        params: { name: 'echo', arguments: { say: 'hi' } } }));
    out.longIdCall = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' }));
    out.ping = await next();
    out.exitCode = await exit();
    return out;
}

async function held(home) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home], stderr: 'inherit' });
    const client = new Client({ name: 'held-agent', version: '1.0.0' });
    await client.connect(transport);
    const progress = [];
    const result = await client.callTool({ name: 'echo', arguments: { held: true } }, undefined,
        { onprogress: (p) => progress.push(p), timeout: 30000 });
    await client.close();
    return { progress, result };
}

async function search(home) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--search', '--home', home], stderr: 'inherit' });
    const client = new Client({ name: 'search-agent', version: '1.0.0' });
    await client.connect(transport);
    const out = {};
    out.listed = (await client.listTools()).tools.map((t) => t.name);
    const find = async (query, limit) => {
        const r = await client.callTool({ name: 'search_tools', arguments: limit ? { query, limit } : { query } });
        return (r.structuredContent?.tools ?? []).map((t) => t.name);
    };
    out.calendar = await find('create a calendar event', 3);
    out.words = await find('count the words of a text');
    out.denied = await find('delete a file', 50);
    const first = (await client.callTool({ name: 'search_tools', arguments: { query: 'count the words of a text', limit: 1 } }))
        .structuredContent.tools[0];
    out.firstSchema = first.inputSchema;
    out.called = await client.callTool({ name: 'call_tool', arguments: { name: first.name, arguments: { text: 'one two three' } } });
    out.deniedCall = await client.callTool({ name: 'call_tool', arguments: { name: 'delete_file', arguments: { path: 'x' } } });
    try {
        await client.callTool({ name: 'search_tools', arguments: {} });
        out.bad = null;
    } catch (e) {
        out.bad = { code: e.code, message: e.message };
    }
    await client.close();
    return out;
}

async function profile(home, name, args) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home, ...args], stderr: 'inherit' });
    const client = new Client({ name, version: '1.0.0' });
    await client.connect(transport);
    const out = { calls: {}, viaCallTool: {} };
    const listed = (await client.listTools()).tools;
    out.listed = listed.map((t) => t.name);
    out.descriptions = Object.fromEntries(listed.map((t) => [t.name, t.description]));
    out.annotations = Object.fromEntries(listed.map((t) => [t.name, t.annotations ?? null]));
    const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('');
    for (const tool of (process.env.CALLS ?? '').split(',').filter(Boolean)) {
        const r = await client.callTool({ name: tool, arguments: { text: 'one two' } });
        out.calls[tool] = { isError: r.isError ?? false, text: text(r) };
    }
    if (process.env.QUERY) {
        const r = await client.callTool({ name: 'search_tools', arguments: { query: process.env.QUERY, limit: 50 } });
        out.found = (r.structuredContent?.tools ?? []).map((t) => t.name);
    }
    for (const tool of (process.env.VIA_CALL_TOOL ?? '').split(',').filter(Boolean)) {
        const r = await client.callTool({ name: 'call_tool', arguments: { name: tool, arguments: { text: 'one two' } } });
        out.viaCallTool[tool] = { isError: r.isError ?? false, text: text(r) };
    }
    await client.close();
    return out;
}

async function calls(home) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home], stderr: 'inherit' });
    const client = new Client({ name: 'import-agent', version: '1.0.0' });
    await client.connect(transport);
    const out = { listed: (await client.listTools()).tools.map((t) => t.name), calls: [] };
    const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('');
    for (const { name, arguments: args } of JSON.parse(process.env.CALLS_JSON ?? '[]')) {
        try {
            const r = await withTimeout(client.callTool({ name, arguments: args }), 60000, name);
            out.calls.push({ name, isError: r.isError ?? false, text: text(r) });
        } catch (e) {
            out.calls.push({ name, isError: true, text: `threw: ${e.message}` });
        }
    }
    await client.close();
    return out;
}

async function pages(home, args) {
    const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home, ...args], stderr: 'inherit' });
    const client = new Client({ name: 'pages-agent', version: '1.0.0' });
    await client.connect(transport);
    const out = { sizes: [], names: [] };
    let cursor;
    do {
        const r = await client.listTools(cursor ? { cursor } : {});
        out.sizes.push(r.tools.length);
        for (const t of r.tools) out.names.push(t.name);
        cursor = r.nextCursor;
    } while (cursor && out.sizes.length < 100);
    await client.close();
    writeFileSync(process.env.NAMES_FILE, out.names.join('\n') + '\n');
    delete out.names;
    return out;
}

// A request of 65 MiB (over meith mcp's 64 MiB) with its id first, then a ping: the first is
// answered under its id, the ping after it too, and nothing else comes between.
async function oversized(args) {
    const { next, send, exit } = bridge(args);
    const out = {};
    send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'big', version: '0' } } }));
    out.initialize = await next();
    send('{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":{"say":"' +
         'x'.repeat(65 << 20) + '"}}}');
    out.huge = await next();
    send(JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'ping' }));
    out.ping = await next();
    out.exitCode = await exit();
    return out;
}

// Two SDK clients ("agent-a", "agent-b") through two `meith mcp` processes on a per-session
// Playwright source (prefix pw_): both navigate at once (A to URL_A, B to URL_B) and snapshot;
// A closes its browser; B snapshots again; A navigates again. Then A disconnects; the processes under A's instance
// (from `meith sources pw --json`) are polled until gone (up to 20 s) while B stays connected,
// and B snapshots once more.
async function pair(home, urlA, urlB) {
    const connect = async (name) => {
        const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home], stderr: 'inherit' });
        const client = new Client({ name, version: '1.0.0' });
        await client.connect(transport);
        return client;
    };
    const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('');
    const call = async (client, name, args = {}) => {
        const r = await withTimeout(client.callTool({ name, arguments: args }), 90000, name);
        return { isError: r.isError ?? false, text: text(r) };
    };
    const [a, b] = await Promise.all([connect('agent-a'), connect('agent-b')]);
    const out = {};
    [out.navA, out.navB] = await Promise.all([call(a, 'pw_browser_navigate', { url: urlA }),
        call(b, 'pw_browser_navigate', { url: urlB })]);
    [out.snapA, out.snapB] = await Promise.all([call(a, 'pw_browser_snapshot'), call(b, 'pw_browser_snapshot')]);
    out.closeA = await call(a, 'pw_browser_close');
    out.snapBAfterClose = await call(b, 'pw_browser_snapshot');
    out.navAAgain = await call(a, 'pw_browser_navigate', { url: urlA }); // a browser again
    const status = () => JSON.parse(execFileSync(meith, ['sources', 'pw', '--json', '--home', home]).toString());
    const instances = status().instances ?? [];
    out.instances = instances.map((i) => ({ agent: i.agent, state: i.state, key: i.key }));
    const pidA = instances.find((i) => i.agent === 'agent-a')?.pid;
    // Every process under A's instance now (its browser and the server itself).
    const parents = () => {
        const map = new Map();
        for (const entry of readdirSync('/proc')) {
            if (!/^\d+$/.test(entry)) continue;
            try {
                const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
                const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
                if (fields[0] !== 'Z') map.set(Number(entry), Number(fields[1]));
            } catch { /* gone */ }
        }
        return map;
    };
    const tree = (root) => {
        const map = parents(), found = [root];
        for (let i = 0; i < found.length; i++)
            for (const [pid, parent] of map) if (parent === found[i]) found.push(pid);
        return found;
    };
    const underA = pidA ? tree(pidA) : [];
    out.processesUnderA = underA.length;
    await a.close();
    const alive = (pid) => parents().has(pid);
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline && underA.some(alive)) await new Promise((r) => setTimeout(r, 100));
    out.aliveUnderAAfterGrace = underA.filter(alive).length;
    out.instancesAfter = (status().instances ?? []).map((i) => i.agent);
    out.snapBLast = await call(b, 'pw_browser_snapshot');
    await b.close();
    return out;
}

// Two SDK clients ("roots-a", "roots-b"), each declaring `roots` with a root of its own
// (file:///roots/a, file:///roots/b), call server-everything's get-roots-list (prefix ev_) one
// after the other: what each was shown.
async function rootsPair(home) {
    const connect = async (name, uri) => {
        const transport = new StdioClientTransport({ command: meith, args: ['mcp', '--home', home], stderr: 'inherit' });
        const client = new Client({ name, version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
        client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri, name }] }));
        await client.connect(transport);
        return client;
    };
    const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('');
    const a = await connect('roots-a', 'file:///roots/a');
    const b = await connect('roots-b', 'file:///roots/b');
    const out = {};
    out.a = text(await withTimeout(a.callTool({ name: 'ev_get-roots-list', arguments: {} }), 30000, 'a'));
    out.b = text(await withTimeout(b.callTool({ name: 'ev_get-roots-list', arguments: {} }), 30000, 'b'));
    out.aAgain = text(await withTimeout(a.callTool({ name: 'ev_get-roots-list', arguments: {} }), 30000, 'a2'));
    await a.close();
    await b.close();
    return out;
}

const modes = { sdk: () => sdk(rest[0], rest[1]), raw: () => raw(rest), typed: () => typed(rest),
    roots: () => rootsPair(rest[0]),
    pair: () => pair(rest[0], rest[1], rest[2]),
    oversized: () => oversized(rest),
    held: () => held(rest[0]), search: () => search(rest[0]),
    profile: () => profile(rest[0], rest[1], rest.slice(2)), pages: () => pages(rest[0], rest.slice(1)),
    calls: () => calls(rest[0]) };
const result = await modes[mode]();
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(0);
