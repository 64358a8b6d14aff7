// meith/tool-host and meith/client against the real meithd (node --test).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client, connect, errors, locateSocket, NotRunning, ConnectionLost } from '../src/client.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const meithd = process.env.MEITHD ?? path.resolve(here, '../../../build-dev/bin/meithd');

class Daemon {
    constructor(config) {
        this.home = fs.mkdtempSync(path.join(os.tmpdir(), 'meith-node-'));
        fs.chmodSync(this.home, 0o700);
        fs.writeFileSync(path.join(this.home, 'meithd.toml'), config);
        this.socket = path.join(this.home, 'd.sock');
    }
    async start() {
        fs.rmSync(path.join(this.home, 'config.json'), { force: true });
        const env = { ...process.env };
        delete env.XDG_RUNTIME_DIR;
        delete env.MEITH_HOME;
        const log = fs.openSync(path.join(this.home, 'meithd.log'), 'a');
        this.proc = spawn(meithd, ['--home', this.home, '--socket', this.socket], { env, stdio: ['ignore', log, log] });
        for (let i = 0; i < 1000; i++) {
            try {
                if (JSON.parse(fs.readFileSync(path.join(this.home, 'config.json'), 'utf8')).pid === this.proc.pid) return;
            } catch { /* not yet */ }
            await sleep(20);
        }
        throw new Error('meithd did not start: ' + fs.readFileSync(path.join(this.home, 'meithd.log'), 'utf8'));
    }
    async stop() {
        if (!this.proc || this.proc.exitCode !== null) return;
        const exited = new Promise((r) => this.proc.once('exit', r));
        this.proc.kill('SIGTERM');
        await exited;
    }
}

const hostToml = (name, extra = '') =>
    `[[sources]]\nname = "${name}"\nkind = "host"\ncommand = ["node", ${JSON.stringify(path.join(here, 'demo_host.mjs'))}]\n` +
    `config = { greeting = "hi" }\n${extra}\n`;

let d;
// A short shutdown grace: a call in flight at a stop ends RUNTIME_SHUTTING_DOWN soon.
before(async () => { d = new Daemon(hostToml('js') + '[tools]\nshutdown_grace_ms = 200\n'); await d.start(); });
after(async () => { await d.stop(); fs.rmSync(d.home, { recursive: true, force: true }); });

async function probed(c, name = 'js') {
    for (let i = 0; i < 500; i++) {
        const s = (await c.listSources()).find((x) => x.name === name);
        if (Array.isArray(s?.methods)) return s;
        await sleep(10);
    }
    throw new Error('never probed');
}

test('discovery, hello, object and text payloads, state from init', async () => {
    assert.equal(locateSocket(d.home), d.socket);
    const c = await connect({ home: d.home, name: 'node-test' });
    assert.equal(c.hello.type, 'hello_result');
    const tools = await c.listTools();
    assert.equal(tools.find((t) => t.name === 'shout').payloadKind, 'text');
    assert.equal((await c.call('greet', { who: 'ada' })).content, 'hi, ada');
    assert.equal((await c.call('shout', 'quiet\nplease')).content, 'QUIET\nPLEASE');
    c.close();
});

test('streaming events as an async iterator, then the result', async () => {
    const c = await connect({ socket: d.socket });
    const stream = c.stream('count', { n: 5 });
    const seen = [];
    for await (const e of stream) seen.push(e.payload.i);
    assert.deepEqual(seen, [1, 2, 3, 4, 5]);
    assert.deepEqual(stream.result.content, { counted: 5 });
    c.close();
});

test('a slow consumer of many events loses none (bounded buffer, paused socket)', async () => {
    const c = await connect({ socket: d.socket });
    const stream = c.stream('count', { n: 1000 });
    let n = 0;
    for await (const e of stream) {
        assert.equal(e.payload.i, ++n);
        if (n % 200 === 0) await sleep(20);
    }
    assert.equal(n, 1000);
    c.close();
});

test('typed errors: unknown tool, validation, timeout, tool failure, denied', async () => {
    const c = await connect({ socket: d.socket });
    await assert.rejects(c.call('nope'), errors.UnknownTool);
    await assert.rejects(c.call('greet', { who: 5 }), errors.ValidationError);
    await assert.rejects(c.call('slow', { ms: 3000 }, { timeoutMs: 200 }), errors.Timeout);
    await assert.rejects(c.call('fail'), (e) => e instanceof errors.ToolFailed && /nope/.test(e.message));
    await assert.rejects(c.call('write'), errors.PermissionDenied); // plugin may not write files
    const r = await c.call('fail', {}, { check: false });
    assert.equal(r.ok, false);
    c.close();
});

test('an AbortSignal cancels the call', async () => {
    const c = await connect({ socket: d.socket });
    const ac = new AbortController();
    const started = Date.now();
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(c.call('slow', { ms: 5000 }, { signal: ac.signal }), errors.Cancelled);
    assert.ok(Date.now() - started < 2000);
    assert.equal((await c.call('greet', { who: 'after' })).content, 'hi, after');
    // The cancel reached the SDK host, which aborted the tool's signal and said so (§16).
    let host;
    for (let i = 0; i < 100 && !host?.cancel; i++) {
        host = (await c.listSources()).find((s) => s.kind === 'host');
        if (!host?.cancel) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(host.cancel, true);
    c.close();
});

test('every optional method through the SDK host: preview, model, display, tags', async () => {
    const c = await connect({ socket: d.socket });
    assert.equal((await probed(c)).methods.length, 7);
    assert.deepEqual(await c.preview('greet', { who: 'bo' }), { text: 'about to greet {"who":"bo"}', permission: 'allow' });
    const r = await c.call('greet', { who: 'cy' }, { model: true, display: true });
    assert.equal(r.modelContent, '=> "hi, cy"');
    assert.deepEqual(r.meta.display, { type: 'text', content: '[=> "hi, cy"]' });
    const tools = await c.listTools({ models: [{ name: 'm1' }] });
    assert.deepEqual(tools.find((t) => t.name === 'greet').tags, ['node', 'm:m1']);
    const anthropic = await c.listTools({ format: 'anthropic' });
    assert.ok(anthropic.every((t) => 'input_schema' in t));
    c.close();
});

test('a daemon restarted under the client: in-flight fails, the next request reconnects', async () => {
    const c = await connect({ socket: d.socket });
    const slow = c.call('slow', { ms: 5000 }).then(() => null, (e) => e);
    await sleep(100);
    await d.stop();
    const e = await slow;
    assert.ok(e instanceof ConnectionLost || e instanceof errors.RuntimeShuttingDown, String(e));
    await d.start();
    assert.equal((await c.call('greet', { who: 'again' })).content, 'hi, again');
    c.close();
});

test('no daemon: NotRunning', async () => {
    await assert.rejects(new Client({ socket: path.join(d.home, 'none.sock') }).connect(), NotRunning);
});
