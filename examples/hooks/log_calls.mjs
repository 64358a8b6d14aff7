#!/usr/bin/env node
// An example observe hook: appends every payload it gets, one JSON line each, to a file.
//
//   [[hooks]]
//   name = "log-calls"
//   kind = "observe"
//   phase = "after_execution"      # or before_execution, session_start, session_end
//   command = ["node", "hooks/log_calls.mjs"]
//
// The file: the first argument after the script (node hooks/log_calls.mjs /tmp/events.jsonl),
// else $MEITH_HOME/hook-events.jsonl, else ~/.meith/hook-events.jsonl. meithd passes
// MEITH_HOME to hooks only when it is set in the daemon's own environment (--home does not set
// it), so give the path explicitly when you start meithd with --home. The file is created
// with mode 0600: payloads carry tool arguments and results, unredacted.
//
// Each line is the payload with a "loggedAt" time in front:
//   {"loggedAt":"2026-11-21T11:47:31.606Z","hook":"tool","phase":"after_execution",
//    "request":{"name":"count",…},"response":{"ok":true,"content":{"counted":2}}}
// and the answer is {"ack":true}. Observe hooks never block a call: whatever this script
// does, the call goes on.
//
// With --server (mode = "server" on the [[hooks]] table) it stays running and answers
// {"jsonrpc":"2.0","id":N,"method":"hook","params":<payload>} lines with
// {"jsonrpc":"2.0","id":N,"result":{"ack":true}}, saving a process start per call.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

const server = process.argv.includes('--server');
const explicit = process.argv.slice(2).find((a) => a !== '--server');
const home = process.env.MEITH_HOME || path.join(os.homedir(), '.meith');
const file = explicit ?? path.join(home, 'hook-events.jsonl');

function record(payload) {
    const line = JSON.stringify({ loggedAt: new Date().toISOString(), ...payload }) + '\n';
    try {
        fs.appendFileSync(file, line, { mode: 0o600 }); // one write(2) per line, O_APPEND
    } catch (e) {
        console.error(`log_calls: cannot append to ${file}: ${e.message}`);
    }
}

const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

if (server) {
    readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
        .on('line', (line) => {
            let msg;
            try {
                msg = JSON.parse(line);
            } catch {
                return;
            }
            if (msg?.method !== 'hook' || !('id' in msg)) return;
            if (msg.params !== null && typeof msg.params === 'object') record(msg.params);
            send({ jsonrpc: '2.0', id: msg.id, result: { ack: true } });
        })
        .on('close', () => process.exit(0));
} else {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    try {
        const payload = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (payload !== null && typeof payload === 'object') record(payload);
    } catch {
        console.error('log_calls: the hook payload is not JSON');
    }
    send({ ack: true });
}
