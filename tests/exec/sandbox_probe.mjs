#!/usr/bin/env node
// One-shot exec tool for the sandbox tests (docs/protocol.md §15): tries one thing the kernel
// sandbox may forbid and reports what happened, never failing itself.
//   {"action":"write","path":P}        writes P
//   {"action":"connect","port":N}      TCP connect to 127.0.0.1:N
//   {"action":"spawn"}                 runs /bin/sh -c true
//   {"action":"tmpdir"}                writes a file in $TMPDIR
//   {"action":"rename","path":P,"to":Q} renames P to Q (and back when it worked)
// Answers {"result":{"done":true|false,"code":"EACCES"|...}}; with "fail":true a refusal is
// thrown as a tool would (its message on stderr, exit status 1) instead.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

const input = JSON.parse(fs.readFileSync(0, 'utf8') || '{}');
const args = input.args ?? {};
const answer = (result) => process.stdout.write(JSON.stringify({ result }) + '\n');
const refused = (e) => {
    if (!args.fail) return answer({ done: false, code: e.code ?? String(e) });
    process.stderr.write(`Error: ${e.message}\n`);
    process.exit(1);
};

try {
    switch (args.action) {
    case 'write':
        fs.writeFileSync(args.path, 'written by sandbox_probe\n');
        answer({ done: true });
        break;
    case 'rename':
        fs.renameSync(args.path, args.to);
        fs.renameSync(args.to, args.path);
        answer({ done: true });
        break;
    case 'tmpdir': {
        const p = path.join(process.env.TMPDIR ?? '/tmp', 'probe.txt');
        fs.writeFileSync(p, 'x');
        answer({ done: true, path: p });
        break;
    }
    case 'spawn': {
        const r = spawnSync('/bin/sh', ['-c', 'true']);
        answer(r.error ? { done: false, code: r.error.code } : { done: r.status === 0 });
        break;
    }
    case 'connect': {
        const s = net.connect({ host: '127.0.0.1', port: args.port });
        s.on('connect', () => { answer({ done: true }); s.destroy(); });
        s.on('error', refused);
        break;
    }
    default:
        answer({ done: false, code: 'BAD_ACTION' });
    }
} catch (e) {
    refused(e);
}
