// meith/client's MCP families (docs/protocol.md §17) against the real meithd with the npm
// server-everything as a source: mcpRequest answers and errors, and the server's sampling and
// elicitation requests answered by the client's handlers during its call (node --test).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connect, errors, McpError } from '../src/client.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const meithd = process.env.MEITHD ?? path.resolve(here, '../../../build-dev/bin/meithd');
const everything = path.resolve(here,
    '../../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const installed = fs.existsSync(everything);

let home, proc;
before(async () => {
    if (!installed) return;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'meith-node-mcp-'));
    fs.chmodSync(home, 0o700);
    fs.writeFileSync(path.join(home, 'meithd.toml'),
        '[permissions.callers.plugin]\nallow = ["read-only", "accesses-network", "unknown"]\n\n' +
        `[[sources]]\nname = "everything"\nkind = "mcp"\ncommand = ["node", ${JSON.stringify(everything)}, "stdio"]\n` +
        'prefix = "ev_"\nsandbox = "off"\n');
    const env = { ...process.env };
    delete env.XDG_RUNTIME_DIR;
    delete env.MEITH_HOME;
    const log = fs.openSync(path.join(home, 'meithd.log'), 'a');
    proc = spawn(meithd, ['--home', home, '--socket', path.join(home, 'd.sock')], { env, stdio: ['ignore', log, log] });
    for (let i = 0; i < 1000; i++) {
        try {
            if (JSON.parse(fs.readFileSync(path.join(home, 'config.json'), 'utf8')).pid === proc.pid) return;
        } catch { /* not yet */ }
        await sleep(20);
    }
    throw new Error('meithd did not start: ' + fs.readFileSync(path.join(home, 'meithd.log'), 'utf8'));
});
after(async () => {
    if (!proc) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    fs.rmSync(home, { recursive: true, force: true });
});

test('mcpRequest: resources, prompts and a JSON-RPC error', { skip: !installed && 'skipped: npm MCP servers not installed (scripts/install-deps)' }, async () => {
    const c = await connect({ socket: path.join(home, 'd.sock') });
    const uri = 'demo://resource/static/document/instructions.md';
    assert.ok((await c.mcpRequest('resources/list')).resources.some((r) => r.uri === uri));
    const read = await c.mcpRequest('resources/read', { uri });
    assert.ok(read.contents[0].text.startsWith('# Everything Server'));
    const got = await c.mcpRequest('prompts/get', { name: 'ev_args-prompt', arguments: { city: 'Oslo' } });
    assert.equal(got.messages[0].content.text, "What's weather in Oslo?");
    // The only source offering resources is asked; its JSON-RPC error comes back unchanged.
    await assert.rejects(c.mcpRequest('resources/read', { uri: 'nope://x' }),
        (e) => e instanceof McpError && e.code === -32602 && /nope:\/\/x not found/.test(e.message));
    c.close();
});

test('handlers answer the server\'s sampling and elicitation during a call', { skip: !installed && 'skipped: npm MCP servers not installed' }, async () => {
    const asked = [];
    const c = await connect({
        socket: path.join(home, 'd.sock'),
        handlers: {
            'sampling/createMessage': async (p) => {
                asked.push(p);
                return { model: 'node', role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text: 'sampled by node' } };
            },
            'elicitation/create': async (p) => { asked.push(p); return { action: 'cancel' }; },
        },
    });
    const s = await c.call('ev_trigger-sampling-request', { prompt: 'yo', maxTokens: 5 });
    assert.match(s.content.content[0].text, /sampled by node/);
    const e = await c.call('ev_trigger-elicitation-request', {});
    assert.match(e.content.content[0].text, /cancelled/);
    assert.match(asked[0].messages[0].content.text, /yo$/);
    c.close();
    // A client without handlers: the server's request is refused, saying why.
    const bare = await connect({ socket: path.join(home, 'd.sock') });
    await assert.rejects(bare.call('ev_trigger-sampling-request', { prompt: 'x' }),
        (err) => err instanceof errors.ToolFailed && /did not declare the capability/.test(err.message));
    bare.close();
});
