#!/usr/bin/env node
// An example filter hook: refuses tool calls that would touch a `.git` folder.
//
//   [[hooks]]
//   name = "no-git"
//   kind = "filter"
//   phase = "before_execution"
//   command = ["node", "hooks/block_destructive.mjs"]
//   tools = ["write_file", "delete_file"]     # globs; leave out for every tool
//
// meithd runs it once per call with the payload on stdin, e.g.
//   {"hook":"tool","phase":"before_execution",
//    "request":{"name":"delete_file","args":{"path":".git/config"},"call_id":"c1",
//               "session_id":"s_…","caller":"cli"}}
// and reads one answer from stdout: {"allow":true} or {"allow":false,"reason":"…"}.
// A call is refused when any `path` argument (at any depth of args, or any string in a
// `paths` array) has a `.git` component: ".git", ".git/config", "a/.git/HEAD",
// "./x/../.git/hooks". Filter hooks fail closed: if this script crashes, hangs past the hook's
// timeout_ms or prints something else, meithd refuses the call.
//
// With --server it stays running and answers JSON-RPC 2.0 lines instead:
//   → {"jsonrpc":"2.0","id":1,"method":"hook","params":<payload>}
//   ← {"jsonrpc":"2.0","id":1,"result":{"allow":true}}
// (set mode = "server" on the [[hooks]] table to use it that way).

import readline from 'node:readline';

const MAX_DEPTH = 8;

/** True when `p` names `.git` or something inside one, after resolving "." and "..". */
function touchesGit(p) {
    const parts = [];
    for (const part of p.replaceAll('\\', '/').split('/')) {
        if (part === '' || part === '.') continue;
        if (part === '..') parts.pop();
        else parts.push(part);
    }
    return parts.some((part) => part.toLowerCase() === '.git');
}

/** Every string under a `path` key, or in a `paths` array, anywhere in `value`. */
function pathsIn(value, depth = 0, out = []) {
    if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return out;
    for (const [key, v] of Object.entries(value)) {
        if (key === 'path' && typeof v === 'string') out.push(v);
        else if (key === 'paths' && Array.isArray(v)) out.push(...v.filter((s) => typeof s === 'string'));
        else pathsIn(v, depth + 1, out);
    }
    return out;
}

function decide(payload) {
    if (payload?.hook !== 'tool') return { allow: true };
    const bad = pathsIn(payload.request?.args).find(touchesGit);
    return bad === undefined ? { allow: true } : { allow: false, reason: 'refusing to touch .git' };
}

const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

if (process.argv.includes('--server')) {
    readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
        .on('line', (line) => {
            let msg;
            try {
                msg = JSON.parse(line);
            } catch {
                return;
            }
            if (msg?.method === 'hook' && 'id' in msg) {
                send({ jsonrpc: '2.0', id: msg.id, result: decide(msg.params) });
            }
        })
        .on('close', () => process.exit(0));
} else {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    let payload;
    try {
        payload = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
        // Saying nothing useful would also refuse the call; a reason is kinder.
        send({ allow: false, reason: 'block_destructive: the hook payload is not JSON' });
        process.exit(0);
    }
    send(decide(payload));
}
