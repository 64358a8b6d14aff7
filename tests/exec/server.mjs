#!/usr/bin/env node
// Test server-mode exec tool for the end-to-end tests: JSON-RPC 2.0, one object per line.
//
//   → {"jsonrpc":"2.0","id":N,"method":"execute","params":{"args":{"mode":…}}}
//   ← {"jsonrpc":"2.0","id":N,"result":…}  or  {"jsonrpc":"2.0","id":N,"error":{…}}
//
// args.mode:
//   echo     result: args
//   error    error {code:-32001, message:"asked to fail", data:{"why":"test"}}
//   sleep    result "slept" after args.ms (requests run concurrently; answers go out by id,
//            in completion order)
//   late     result "late-answer" after args.ms (to check a late answer for a cancelled or
//            timed-out call is not given to another call)
//   pid      result: process.pid
//   ticker   appends "tick N" to args.path every args.interval_ms until notifications/cancelled
//            for its id arrives (then "stopped: <reason>"); never answers
//   crash    process.exit(9) at once, without an answer
//   stderr   writes args.text (default "server says hi") to stderr, result "logged"
//   toolresult  result: a ToolResult envelope {ok, content:"small", meta:{pad:"x"×args.meta_bytes}}
//   garbage  prints `not json` and {"jsonrpc":"2.0","id":"no-such-id","result":0}, then
//            answers normally with result "after-garbage"
//   other    error -32602 "unknown mode …"
// Other methods: error -32601. Lines that are not JSON, and messages without an id, are ignored.
// Exits 0 when stdin reaches EOF (answers still pending are dropped).
//
// Flags:
//   --crash-after-start-ms=N   exit 5 N ms after start (crash-loop tests)
//   --pid-file=PATH            append process.pid + "\n" to PATH at start

import fs from 'node:fs';
import readline from 'node:readline';

for (const arg of process.argv.slice(2)) {
    let m;
    if ((m = /^--crash-after-start-ms=(\d+)$/.exec(arg))) {
        setTimeout(() => process.exit(5), Number(m[1]));
    } else if ((m = /^--pid-file=(.+)$/s.exec(arg))) {
        fs.appendFileSync(m[1], `${process.pid}\n`);
    } else {
        console.error(`server.mjs: unknown flag ${arg}`);
        process.exit(2);
    }
}

function send(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}
const ok = (id, result) => send({ jsonrpc: '2.0', id, result });
const fail = (id, code, message, data) =>
    send({ jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } });

// ticker calls in flight, by request id: their interval timers and files.
const tickers = new Map();

function handle(msg) {
    if (msg?.method === 'notifications/cancelled' && !('id' in msg)) {
        // docs/protocol.md §16: stop that request's work.
        const t = tickers.get(msg.params?.requestId);
        if (t) {
            clearInterval(t.timer);
            tickers.delete(msg.params.requestId);
            fs.appendFileSync(t.path, `stopped: ${msg.params?.reason}\n`);
        }
        return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg) || !('id' in msg)) return;
    const { id } = msg;
    if (msg.method !== 'execute') return fail(id, -32601, `unknown method ${JSON.stringify(msg.method)}`);
    const args = msg.params?.args;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        return fail(id, -32602, 'params.args must be an object');
    }
    const ms = Number(args.ms) || 0;
    switch (args.mode) {
        case 'toolresult':
            return ok(id, { ok: true, content: 'small', meta: { pad: 'x'.repeat(Number(args.meta_bytes) || 0) } });
        case 'echo':
            return ok(id, args);
        case 'error':
            return fail(id, -32001, 'asked to fail', { why: 'test' });
        case 'sleep':
            return void setTimeout(() => ok(id, 'slept'), ms);
        case 'late':
            return void setTimeout(() => ok(id, 'late-answer'), ms);
        case 'pid':
            return ok(id, process.pid);
        case 'ticker': {
            // Appends "tick N" to args.path every args.interval_ms (default 20) until cancelled
            // by notifications/cancelled; never answers.
            let n = 0;
            const timer = setInterval(() => fs.appendFileSync(args.path, `tick ${++n}\n`), Number(args.interval_ms) || 20);
            tickers.set(id, { timer, path: args.path });
            return;
        }
        case 'crash':
            return process.exit(9);
        case 'stderr':
            process.stderr.write(`${typeof args.text === 'string' ? args.text : 'server says hi'}\n`);
            return ok(id, 'logged');
        case 'garbage':
            process.stdout.write('not json\n');
            ok('no-such-id', 0);
            return ok(id, 'after-garbage');
        default:
            return fail(id, -32602, `unknown mode ${JSON.stringify(args.mode)}`);
    }
}

readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
    .on('line', (line) => {
        let msg;
        try {
            msg = JSON.parse(line);
        } catch {
            return; // not JSON: ignored
        }
        handle(msg);
    })
    .on('close', () => process.exit(0));
