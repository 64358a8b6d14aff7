#!/usr/bin/env node
// Self-test of the two Node tool hosts, without the daemon: spawns
// examples/node-host/host.mjs and tests/hosts/test_host.mjs, speaks the host protocol
// (docs/protocol.md §7) to them over stdio and checks their answers.
//
//   node tests/hosts/host_selftest.mjs        exit status 0 = every check passed
//
// Every stdout line of a host must be a protocol frame unless a test asks for garbage.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLE_HOST = path.resolve(here, '../../examples/node-host/host.mjs');
const TEST_HOST = path.resolve(here, 'test_host.mjs');
const REQUEST_TIMEOUT_MS = 5000;

// ---------------------------------------------------------------------------------------------
// A host process and a client for it.

class Host {
    constructor(script, args = [], { cwd } = {}) {
        this.child = spawn(process.execPath, [script, ...args], { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
        this.nextId = 1;
        this.pending = new Map(); // id -> {resolve, reject, events, timer}
        this.frames = []; // every parsed stdout frame, in arrival order
        this.garbage = []; // stdout lines that were not JSON
        this.stderr = '';
        this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
        this.child.stderr.setEncoding('utf8').on('data', (s) => (this.stderr += s));
        this.child.stdin.on('error', () => {}); // writing to a host that crashed on purpose
        readline.createInterface({ input: this.child.stdout }).on('line', (line) => this.onLine(line));
    }

    onLine(line) {
        let frame;
        try {
            frame = JSON.parse(line);
        } catch {
            this.garbage.push(line);
            return;
        }
        this.frames.push(frame);
        const call = this.pending.get(frame.id);
        if (!call) return;
        if (frame.event) {
            call.events.push(frame.event);
            return;
        }
        clearTimeout(call.timer);
        this.pending.delete(frame.id);
        call.resolve({ ...frame, events: call.events });
    }

    send(obj) {
        this.child.stdin.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n');
    }

    /** Sends a request and resolves with its response frame, plus `events` streamed before it. */
    request(method, params = {}, { timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
        const id = `r${this.nextId++}`;
        return new Promise((resolve, reject) => {
            const timer = setTimeout(() => {
                this.pending.delete(id);
                reject(new Error(`no answer to ${method} ${JSON.stringify(params).slice(0, 200)} within ${timeoutMs} ms`));
            }, timeoutMs);
            this.pending.set(id, { resolve, reject, events: [], timer });
            this.send({ v: 1, id, method, params });
        });
    }

    /** execute_tool; resolves with {value, state, events}, failing on an ok:false answer. */
    async call(tool_name, args = {}, state = {}) {
        const r = await this.request('execute_tool', { tool_name, arguments: args, state });
        assert.equal(r.ok, true, `${tool_name}: ok:false ${JSON.stringify(r.error)}`);
        assert.equal(r.v, 1);
        return { value: r.result.value, state: r.result.state, events: r.events };
    }

    /** A call that must succeed; returns its result. */
    async good(tool_name, args, state) {
        const { value } = await this.call(tool_name, args, state);
        assert.equal(value.success, true, `${tool_name} ${JSON.stringify(args)}: ${value.error}`);
        return value.result;
    }

    /** A call that must fail with success:false and an error matching `pattern`. */
    async bad(tool_name, args, pattern) {
        const { value } = await this.call(tool_name, args);
        assert.equal(value.success, false, `${tool_name} ${JSON.stringify(args)} should fail, got ${JSON.stringify(value)}`);
        assert.equal(typeof value.error, 'string');
        if (pattern) assert.match(value.error, pattern);
        return value.error;
    }

    async close() {
        this.child.stdin.end();
        return withTimeout(this.exited, 3000, 'host did not exit after stdin EOF');
    }

    kill() {
        if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    }
}

function withTimeout(promise, ms, message) {
    let timer;
    return Promise.race([
        promise.finally(() => clearTimeout(timer)),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms))),
    ]);
}

const hosts = [];
function start(script, args, options) {
    const h = new Host(script, args, options);
    hosts.push(h);
    return h;
}

// ---------------------------------------------------------------------------------------------
// Test runner

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

function checkSchemaShape(s) {
    assert.ok(Array.isArray(s.capabilities) || !('capabilities' in s), `capabilities of ${JSON.stringify(s)}`);
    if (s.type === 'custom') {
        assert.equal(typeof s.name, 'string');
        assert.equal(typeof s.description, 'string');
        return s.name;
    }
    assert.equal(s.type, 'function');
    assert.equal(typeof s.function.name, 'string');
    assert.equal(typeof s.function.description, 'string');
    assert.equal(s.function.parameters.type, 'object');
    assert.equal(typeof s.function.parameters.properties, 'object');
    return s.function.name;
}

// ---------------------------------------------------------------------------------------------
// The example host

function makeTree() {
    const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'meith-host-selftest-')));
    const root = path.join(base, 'root');
    const outside = path.join(base, 'outside');
    fs.mkdirSync(path.join(root, 'sub'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside secret\n');
    fs.writeFileSync(path.join(root, 'sub', 'inner.txt'), 'inner\n');
    fs.symlinkSync(outside, path.join(root, 'link-out')); // folder outside
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'file-out')); // file outside
    fs.symlinkSync(path.join(outside, 'missing.txt'), path.join(root, 'dangling-out')); // not there yet
    fs.symlinkSync('sub/inner.txt', path.join(root, 'link-in')); // stays inside
    return { base, root, outside };
}

test('example host: init, schemas, state round-trip', async () => {
    const { base, root } = makeTree();
    const h = start(EXAMPLE_HOST);
    try {
        const bad = await h.request('init', { config: { root: path.join(base, 'nope') } });
        assert.equal(bad.ok, false, 'init with a missing root must fail');
        const typo = await h.request('init', { config: { roots: root } });
        assert.equal(typo.ok, false, 'init with an unknown key must fail');
        assert.match(typo.error.detail, /unknown config key/);

        const init = await h.request('init', { config: { root } });
        assert.equal(init.ok, true, JSON.stringify(init.error));
        assert.deepEqual(init.result.state, { calls: 0 });

        const schemas = await h.request('get_tool_schemas', { state: { calls: 0 } });
        assert.equal(schemas.ok, true);
        const byName = Object.fromEntries(schemas.result.value.map((s) => [checkSchemaShape(s), s]));
        assert.deepEqual(Object.keys(byName).sort(), ['count', 'delete_file', 'list_dir', 'read_file', 'write_file']);
        const caps = Object.fromEntries(Object.entries(byName).map(([n, s]) => [n, s.capabilities]));
        assert.deepEqual(caps, {
            read_file: ['read-only'], list_dir: ['read-only'], write_file: ['writes-files'],
            delete_file: ['destructive'], count: ['read-only'],
        });
        for (const s of Object.values(byName)) {
            assert.equal(s.function.parameters.additionalProperties, false, s.function.name);
            assert.ok(Array.isArray(s.function.parameters.required), s.function.name);
        }
        assert.deepEqual(byName.read_file.function.parameters.required, ['path']);
        assert.deepEqual(byName.write_file.function.parameters.required, ['path', 'content']);

        let state = init.result.state;
        for (let i = 1; i <= 3; i++) {
            const r = await h.call('list_dir', {}, state);
            assert.deepEqual(r.state, { calls: i });
            state = r.state;
        }
        assert.deepEqual(h.garbage, []);
        assert.deepEqual(await h.close(), { code: 0, signal: null });
    } finally {
        fs.rmSync(base, { recursive: true, force: true });
    }
});

test('example host: read, write, list, delete inside the root', async () => {
    const { base, root } = makeTree();
    const h = start(EXAMPLE_HOST, [], { cwd: base });
    try {
        // A relative root resolves against the process cwd.
        assert.equal((await h.request('init', { config: { root: 'root' } })).ok, true);

        assert.deepEqual(await h.good('write_file', { path: 'a.txt', content: 'héllo' }), { path: 'a.txt', bytes: 6 });
        assert.deepEqual(await h.good('write_file', { path: 'a.txt', content: ' world\n', append: true }), { path: 'a.txt', bytes: 7 });
        assert.equal(fs.readFileSync(path.join(root, 'a.txt'), 'utf8'), 'héllo world\n');
        const read = await h.good('read_file', { path: 'a.txt' });
        assert.equal(read.content, 'héllo world\n');
        assert.equal(read.size, 13);
        assert.equal(read.path, 'a.txt');
        assert.equal((await h.good('read_file', { path: './sub/../link-in' })).content, 'inner\n');
        await h.good('write_file', { path: 'sub/new.txt', content: 'x' });
        await h.bad('write_file', { path: 'nodir/new.txt', content: 'x' }, /parent folder does not exist/);
        await h.bad('write_file', { path: 'sub', content: 'x' }, /directory/);
        await h.bad('read_file', { path: 'sub' }, /directory/);
        await h.bad('read_file', { path: 'missing.txt' }, /no such file/);

        const list = await h.good('list_dir', {});
        assert.equal(list.path, '.');
        assert.deepEqual(list.entries.map((e) => [e.name, e.type]), [
            ['a.txt', 'file'], ['dangling-out', 'symlink'], ['file-out', 'symlink'],
            ['link-in', 'symlink'], ['link-out', 'symlink'], ['sub', 'dir'],
        ]);
        assert.equal(list.entries[0].size, 13);
        const sub = await h.good('list_dir', { path: 'sub' });
        assert.deepEqual(sub.entries.map((e) => e.name), ['inner.txt', 'new.txt']);
        await h.bad('list_dir', { path: 'a.txt' }, /not a directory/);

        // Size limit and max_bytes (which never cuts a UTF-8 character in half).
        fs.writeFileSync(path.join(root, 'big.txt'), 'é'.repeat(600 * 1024)); // 1.2 MiB
        await h.bad('read_file', { path: 'big.txt' }, /1 MiB.*max_bytes/);
        const head = await h.good('read_file', { path: 'big.txt', max_bytes: 5 });
        assert.equal(head.content, 'éé');
        assert.equal(head.truncated, true);
        assert.equal(head.size, 1200 * 1024);

        // Arguments are checked against the schema.
        await h.bad('read_file', {}, /path is required/);
        await h.bad('read_file', { path: 'a.txt', extra: 1 }, /extra is not an accepted argument/);
        await h.bad('read_file', { path: 7 }, /must be string/);
        await h.bad('count', { n: 0 }, /at least 1/);
        await h.bad('count', { n: 1.5 }, /integer/);
        await h.bad('no_such_tool', {}, /unknown tool/);

        assert.deepEqual(await h.good('delete_file', { path: 'a.txt' }), { path: 'a.txt', deleted: true });
        assert.equal(fs.existsSync(path.join(root, 'a.txt')), false);
        await h.bad('delete_file', { path: 'a.txt' }, /no such file/);
        await h.bad('delete_file', { path: 'sub' }, /directory/);
        await h.bad('delete_file', { path: '.' }, /root folder itself/);
        assert.deepEqual(h.garbage, []);
        await h.close();
    } finally {
        fs.rmSync(base, { recursive: true, force: true });
    }
});

test('example host: ../ and symlink escapes are refused', async () => {
    const { base, root, outside } = makeTree();
    const h = start(EXAMPLE_HOST);
    try {
        assert.equal((await h.request('init', { config: { root } })).ok, true);
        const escapes = /outside the root/;
        for (const p of ['../outside/secret.txt', 'sub/../../outside/secret.txt', '..', path.join(outside, 'secret.txt'), '/etc/passwd']) {
            await h.bad('read_file', { path: p }, escapes);
            await h.bad('list_dir', { path: p }, escapes);
            await h.bad('write_file', { path: p, content: 'pwned' }, escapes);
            await h.bad('delete_file', { path: p }, escapes);
        }
        await h.bad('read_file', { path: 'link-out/secret.txt' }, /through a symlink/);
        await h.bad('read_file', { path: 'file-out' }, /through a symlink/);
        await h.bad('list_dir', { path: 'link-out' }, /through a symlink/);
        await h.bad('write_file', { path: 'link-out/new.txt', content: 'pwned' }, /through a symlink/);
        await h.bad('write_file', { path: 'file-out', content: 'pwned' }, /through a symlink/);
        await h.bad('write_file', { path: 'file-out', content: 'pwned', append: true }, /through a symlink/);
        await h.bad('write_file', { path: 'dangling-out', content: 'pwned' }, /does not exist/);
        await h.bad('delete_file', { path: 'link-out/secret.txt' }, /through a symlink/);
        // delete_file removes a symlink itself, never what it points to.
        assert.deepEqual(await h.good('delete_file', { path: 'file-out' }), { path: 'file-out', deleted: true });

        assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'outside secret\n');
        assert.deepEqual(fs.readdirSync(outside), ['secret.txt']);
        assert.equal(fs.existsSync(path.join(root, 'file-out')), false);
        await h.close();
    } finally {
        fs.rmSync(base, { recursive: true, force: true });
    }
});

test('example host: concurrent count calls interleave; stdin EOF stops a long count', async () => {
    const { base, root } = makeTree();
    const h = start(EXAMPLE_HOST);
    try {
        assert.equal((await h.request('init', { config: { root } })).ok, true);
        const [a, b] = await Promise.all([
            h.call('count', { n: 4, interval_ms: 50 }),
            h.call('count', { n: 3, interval_ms: 70 }),
        ]);
        assert.deepEqual(a.value, { success: true, result: { counted: 4 } });
        assert.deepEqual(b.value, { success: true, result: { counted: 3 } });
        assert.deepEqual(a.events, [1, 2, 3, 4].map((i) => ({ type: 'part', payload: { i, of: 4 } })));
        assert.deepEqual(b.events, [1, 2, 3].map((i) => ({ type: 'part', payload: { i, of: 3 } })));

        // Both were in flight at once: each streamed before the other answered.
        const ids = [...new Set(h.frames.filter((f) => f.event).map((f) => f.id))].slice(-2);
        const firstEvent = (id) => h.frames.findIndex((f) => f.id === id && f.event);
        const answer = (id) => h.frames.findIndex((f) => f.id === id && !f.event);
        assert.ok(firstEvent(ids[0]) < answer(ids[1]) && firstEvent(ids[1]) < answer(ids[0]), 'events did not interleave');

        // A count of ~3 hours in flight must not keep the host alive after stdin EOF.
        h.request('execute_tool', { tool_name: 'count', arguments: { n: 1000, interval_ms: 10000 }, state: {} }).catch(() => {});
        await new Promise((r) => setTimeout(r, 50));
        const t0 = Date.now();
        assert.deepEqual(await h.close(), { code: 0, signal: null });
        assert.ok(Date.now() - t0 < 1500, `exit took ${Date.now() - t0} ms`);
        const last = h.frames.at(-1);
        assert.equal(last.ok, false); // the cut-short count answers before the exit
        assert.equal(last.error.type, 'ShuttingDown');
    } finally {
        fs.rmSync(base, { recursive: true, force: true });
    }
});

test('example host: unknown method, garbage line, bad requests', async () => {
    const h = start(EXAMPLE_HOST);
    const unknown = await h.request('frobnicate', {});
    assert.equal(unknown.ok, false);
    assert.equal(unknown.error.type, 'MethodNotFound');
    assert.equal((await h.request('toString')).error.type, 'MethodNotFound');

    h.send('this is not json {{{');
    h.send('["an array"]');
    h.send('');
    h.send({ v: 1, method: 'init' }); // no id: nothing to answer
    const v2 = await new Promise((resolve) => {
        h.pending.set('v2', { resolve, events: [] });
        h.send({ v: 2, id: 'v2', method: 'init', params: {} });
    });
    assert.equal(v2.error.type, 'UnsupportedVersion');

    // Still serving, and before init no tool runs.
    const r = await h.call('list_dir', {});
    assert.match(r.value.error, /not been initialised/);
    assert.match(h.stderr, /not JSON/);
    assert.deepEqual(h.garbage, []);
    await h.close();
});

// ---------------------------------------------------------------------------------------------
// The test host

const TEST_TOOLS = [
    't_echo', 't_typed', 't_stream', 't_sleep', 't_hang', 't_crash', 't_garbage', 't_fail', 't_throw',
    't_big', 't_toolresult', 't_state', 't_pid', 't_secret', 't_write', 't_nocaps', 't_custom',
];

test('test host: schemas and tool behaviours', async () => {
    const h = start(TEST_HOST);
    const init = await h.request('init', { config: {} });
    assert.equal(init.ok, true);
    assert.deepEqual(init.result.state, { calls: 0 });

    const schemas = (await h.request('get_tool_schemas', { state: init.result.state })).result.value;
    const byName = Object.fromEntries(schemas.map((s) => [checkSchemaShape(s), s]));
    assert.deepEqual(Object.keys(byName).sort(), [...TEST_TOOLS].sort());
    assert.equal('capabilities' in byName.t_nocaps, false);
    assert.deepEqual(byName.t_write.capabilities, ['writes-files']);
    assert.deepEqual(byName.t_echo.capabilities, ['read-only']);
    assert.deepEqual(byName.t_custom, { type: 'custom', name: 't_custom', description: 'freeform', capabilities: ['read-only'] });
    assert.deepEqual(byName.t_typed.function.parameters, {
        type: 'object', properties: { n: { type: 'integer', minimum: 0 } }, required: ['n'], additionalProperties: false,
    });

    assert.deepEqual(await h.good('t_echo', { a: [1, { b: null }] }), { a: [1, { b: null }] });
    assert.deepEqual(await h.good('t_typed', { n: 3 }), { n: 3 });
    const stream = await h.call('t_stream', { n: 3, interval_ms: 5 });
    assert.deepEqual(stream.value.result, { done: 3 });
    assert.deepEqual(stream.events, [1, 2, 3].map((i) => ({ type: 'part', payload: { i } })));
    assert.deepEqual(await h.good('t_sleep', { ms: 20 }), { slept: 20 });
    assert.equal((await h.bad('t_fail', {})), 'tool said no');
    const thrown = await h.request('execute_tool', { tool_name: 't_throw', arguments: {}, state: {} });
    assert.deepEqual(thrown.error, { type: 'TypeError', detail: 'boom', stack: 'TypeError: boom\n    at t_throw (test_host.mjs:1:1)' });
    assert.equal((await h.good('t_big', { bytes: 100000 })).length, 100000);
    assert.deepEqual(await h.good('t_toolresult'), { ok: true, content: { already: 'enveloped' }, meta: { m: 1 } });
    assert.equal(await h.good('t_pid'), h.child.pid);
    assert.deepEqual(await h.good('t_secret', { token: 'tok' }), { echo: 'tok', note: 'Bearer abcdefghijklmnop1234' });
    assert.equal(await h.good('t_write'), 'wrote');
    assert.equal(await h.good('t_nocaps'), 'ran');
    assert.deepEqual(await h.good('t_custom', { input: 'free text' }), { input: 'free text' });
    await h.bad('t_nope', {}, /unknown tool/);

    // State round-trip: each answer's state is the next call's.
    let state = init.result.state;
    for (let i = 1; i <= 3; i++) {
        const r = await h.call('t_state', {}, state);
        assert.equal(r.value.result, i);
        assert.deepEqual(r.state, { calls: i });
        state = r.state;
    }

    // Garbage, then a response for an id not in flight, then the real answer.
    assert.equal(await h.good('t_garbage'), 'after-garbage');
    assert.deepEqual(h.garbage, ['this is not json {{{']);
    assert.ok(h.frames.some((f) => f.id === 'nope' && f.ok === true));

    // t_hang never answers; t_sleep calls overlap.
    await assert.rejects(h.request('execute_tool', { tool_name: 't_hang', arguments: {}, state: {} }, { timeoutMs: 200 }), /no answer/);
    const order = [];
    await Promise.all([
        h.good('t_sleep', { ms: 300 }).then(() => order.push('slow')),
        h.good('t_sleep', { ms: 20 }).then(() => order.push('fast')),
    ]);
    assert.deepEqual(order, ['fast', 'slow'], 't_sleep calls did not overlap');

    assert.equal((await h.request('nope')).error.type, 'MethodNotFound');
    // EOF exits at once although t_hang is still in flight.
    assert.deepEqual(await h.close(), { code: 0, signal: null });
});

test('test host: t_crash exits mid-call with its code', async () => {
    const h = start(TEST_HOST);
    await h.request('init', { config: {} });
    h.request('execute_tool', { tool_name: 't_crash', arguments: { code: 7 }, state: {} }).catch(() => {});
    assert.deepEqual(await withTimeout(h.exited, 3000, 'no exit'), { code: 7, signal: null });
    const h3 = start(TEST_HOST);
    h3.request('execute_tool', { tool_name: 't_crash', arguments: {}, state: {} }).catch(() => {});
    assert.deepEqual(await withTimeout(h3.exited, 3000, 'no exit'), { code: 3, signal: null });
    assert.equal(h.frames.length + h.garbage.length, 1); // the init answer, nothing from t_crash
});

test('test host: flags', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'meith-test-host-'));
    try {
        const pidFile = path.join(dir, 'pids');
        const a = start(TEST_HOST, ['--name-prefix=p_', `--pid-file=${pidFile}`, '--garbage-on-start', '--stderr-secret']);
        await a.request('init', { config: {} });
        const names = (await a.request('get_tool_schemas', { state: {} })).result.value.map(checkSchemaShape);
        assert.deepEqual(names.sort(), TEST_TOOLS.map((n) => `p_${n}`).sort());
        assert.deepEqual(await a.good('p_t_echo', { x: 1 }), { x: 1 });
        await a.bad('t_echo', {}, /unknown tool/);
        assert.equal(a.garbage.length, 1);
        assert.match(a.stderr, /api_key=sk-live-THISISSECRET12345 token: ghp_abcdefghijklmnopqrstuvwxyz0123456789/);
        await a.close();
        const b = start(TEST_HOST, [`--pid-file=${pidFile}`]);
        await b.request('init', { config: {} });
        await b.close();
        assert.equal(fs.readFileSync(pidFile, 'utf8'), `${a.child.pid}\n${b.child.pid}\n`);

        const crash = start(TEST_HOST, ['--crash-on-init']);
        crash.request('init', { config: {} }).catch(() => {});
        assert.deepEqual(await withTimeout(crash.exited, 3000, 'no exit'), { code: 2, signal: null });

        const delayed = start(TEST_HOST, ['--start-delay-ms=300']);
        const t0 = Date.now();
        assert.equal((await delayed.request('init', { config: {} })).ok, true);
        assert.ok(Date.now() - t0 >= 290, 'init answered before --start-delay-ms');
        await delayed.close();

        const dies = start(TEST_HOST, ['--exit-after-init-ms=100']);
        const t1 = Date.now();
        assert.equal((await dies.request('init', { config: {} })).ok, true);
        assert.deepEqual(await withTimeout(dies.exited, 3000, 'no exit'), { code: 4, signal: null });
        assert.ok(Date.now() - t1 >= 90);

        const typo = start(TEST_HOST, ['--nme-prefix=x']);
        assert.deepEqual(await withTimeout(typo.exited, 3000, 'no exit'), { code: 64, signal: null });
        assert.match(typo.stderr, /unknown argument/);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

// ---------------------------------------------------------------------------------------------

let failed = 0;
for (const { name, fn } of tests) {
    try {
        await withTimeout(fn(), 30000, 'test timed out');
        console.log(`ok    ${name}`);
    } catch (e) {
        failed++;
        console.log(`FAIL  ${name}\n      ${String(e?.stack ?? e).replace(/\n/g, '\n      ')}`);
    } finally {
        for (const h of hosts.splice(0)) h.kill();
    }
}
console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed`);
process.exit(failed ? 1 : 0);
