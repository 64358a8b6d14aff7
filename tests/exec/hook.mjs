#!/usr/bin/env node
// Test hook for the end-to-end tests, one-shot (default) or server mode (--server).
//
// One-shot: reads the payload JSON object from stdin to EOF and prints one JSON object.
// Server:   reads {"jsonrpc":"2.0","id":N,"method":"hook","params":<payload>} lines and answers
//           {"jsonrpc":"2.0","id":N,"result":<answer>}; exits 0 on stdin EOF.
//
// Behaviour (first matching flag wins, in this order):
//   --crash                       exit 1 without output (server: on the first hook request)
//   --hang                        never answer (one-shot: keeps running after stdin EOF)
//   --garbage                     print `nope` (server: result "nope", not an object)
//   --observe                     {"ack":true}
//   --deny-if-result-contains=S   after_execution: {"allow":false,"reason":"result contains S"}
//                                 when JSON.stringify(payload.response) contains S
//   --deny-tool=NAME              {"allow":false,"reason":"tool NAME is blocked"} when
//                                 payload.request.name is NAME
//   --deny=REASON                 {"allow":false,"reason":REASON}
//   --allow (or nothing else)     {"allow":true}
// Extra flags:
//   --log=PATH                    append the payload as one JSON line to PATH before anything
//                                 else (also with --crash/--hang/--garbage)
//   --sleep-ms=N                  wait N ms before answering
//   --pid-file=PATH               append process.pid + "\n" to PATH at start

import fs from 'node:fs';
import readline from 'node:readline';

const opt = { server: false, crash: false, hang: false, garbage: false, observe: false, allow: false };
for (const arg of process.argv.slice(2)) {
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    const name = m?.[1];
    const value = m?.[2];
    const flagNames = { server: 'server', crash: 'crash', hang: 'hang', garbage: 'garbage', observe: 'observe', allow: 'allow' };
    const valueNames = {
        deny: 'deny',
        'deny-tool': 'denyTool',
        'deny-if-result-contains': 'denyIfResultContains',
        log: 'log',
        'sleep-ms': 'sleepMs',
        'pid-file': 'pidFile',
    };
    if (name in flagNames && value === undefined) {
        opt[flagNames[name]] = true;
    } else if (name in valueNames && value !== undefined) {
        opt[valueNames[name]] = value;
    } else {
        console.error(`hook.mjs: bad flag ${arg}`);
        process.exit(2);
    }
}
if (opt.pidFile) fs.appendFileSync(opt.pidFile, `${process.pid}\n`);

/** The answer for `payload`, or undefined for "never answer"; may exit (--crash). */
function decide(payload) {
    if (opt.log) fs.appendFileSync(opt.log, JSON.stringify(payload) + '\n');
    if (opt.crash) process.exit(1);
    if (opt.hang) return undefined;
    if (opt.garbage) return 'nope';
    if (opt.observe) return { ack: true };
    if (opt.denyIfResultContains !== undefined && payload?.phase === 'after_execution' &&
        (JSON.stringify(payload.response) ?? '').includes(opt.denyIfResultContains)) {
        return { allow: false, reason: `result contains ${opt.denyIfResultContains}` };
    }
    if (opt.denyTool !== undefined) {
        return payload?.request?.name === opt.denyTool
            ? { allow: false, reason: `tool ${opt.denyTool} is blocked` }
            : { allow: true };
    }
    if (opt.deny !== undefined) return { allow: false, reason: opt.deny };
    return { allow: true };
}

/** Calls `send(answer)` after --sleep-ms, unless the hook hangs. */
function respond(payload, send) {
    const answer = decide(payload);
    if (answer === undefined) return;
    const ms = Number(opt.sleepMs) || 0;
    if (ms > 0) setTimeout(() => send(answer), ms);
    else send(answer);
}

const writeLine = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

if (!opt.server) {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    let payload;
    try {
        payload = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
        console.error('hook.mjs: stdin is not JSON');
        process.exit(2);
    }
    respond(payload, (answer) => {
        if (answer === 'nope') process.stdout.write('nope\n');
        else writeLine(answer);
    });
    if (opt.hang) setInterval(() => {}, 1 << 30);
} else {
    readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
        .on('line', (line) => {
            let msg;
            try {
                msg = JSON.parse(line);
            } catch {
                return;
            }
            if (msg === null || typeof msg !== 'object' || !('id' in msg)) return;
            const { id } = msg;
            if (msg.method !== 'hook') {
                writeLine({ jsonrpc: '2.0', id, error: { code: -32601, message: `unknown method ${JSON.stringify(msg.method)}` } });
                return;
            }
            respond(msg.params, (result) => writeLine({ jsonrpc: '2.0', id, result }));
        })
        .on('close', () => process.exit(0));
}
