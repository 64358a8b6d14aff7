#!/usr/bin/env node
// Test one-shot exec tool for the end-to-end tests: reads {"args":{...}} from stdin to EOF and
// behaves as args.mode says.
//
//   echo     {"result": args}
//   error    {"error":"asked to fail"}
//   pending  {"pending":{"reason":"requires_approval","message":"needs a human"}}
//   exit3    prints {"result":"ignored"}, writes three lines (one with a GitHub token) to
//            stderr, exits 3
//   garbage  prints `not json`
//   chatty   prints 1000 bytes of prose, not JSON: "Hello world\n", a bell, a GitHub token,
//            then filler
//   empty    prints nothing, exits 0
//   quiet    prints nothing on stdout, two lines on stderr ("starting", "config file
//            missing: /nowhere/tool.toml"), exits 0
//   big      {"result":"xxx…"} with args.bytes x's
//   sleep    waits args.ms, then {"result":"slept"}
//   env      {"result": process.env}
//   cwd      {"result": process.cwd()}
//   fds      {"result": [fd, …]}: the numbers open in /proc/self/fd, sorted. Node itself holds
//            a dozen or so (eventpoll, eventfd, pipes: usually 3..20), so a leak check should
//            look at fd_targets rather than expect [0,1,2].
//   fd_targets  {"result": {"<fd>": "<readlink of /proc/self/fd/<fd>>", …}} ("socket:[…]",
//            "pipe:[…]", "/path/audit.jsonl", …)
//   stdin    {"result": "<stdin exactly as received>"}
//   twice    prints two answers, {"result":1} then {"result":2}
//   pem      writes a private key (PEM, several lines) to stderr, exits 1
//   daemon   answers {"result":"answered"}, exits 0, and leaves a setsid'd child that holds
//            stdout and stderr open for args.ms (default 30000) ms
//   anything else: {"error":"unknown mode …"}
// Stdin that is not a JSON object with an "args" object: {"error":…} and exit 2.

import fs from 'node:fs';

async function readStdin() {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    return Buffer.concat(chunks).toString('utf8');
}

function answer(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

/** Open fd numbers, without the one readdirSync used for the listing itself. */
function openFds() {
    const fds = fs.readdirSync('/proc/self/fd').map(Number);
    const targets = {};
    for (const fd of fds.sort((a, b) => a - b)) {
        try {
            targets[fd] = fs.readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
            // closed since the listing: the directory's own descriptor
        }
    }
    return targets;
}

const stdin = await readStdin();
let request;
try {
    request = JSON.parse(stdin);
} catch (e) {
    request = undefined;
}
const args = request?.args;
if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    answer({ error: 'stdin is not {"args":{...}}' });
    process.exitCode = 2;
} else {
    switch (args.mode) {
        case 'echo':
            answer({ result: args });
            break;
        case 'error':
            answer({ error: 'asked to fail' });
            break;
        case 'pending':
            answer({ pending: { reason: 'requires_approval', message: 'needs a human' } });
            break;
        case 'exit3':
            answer({ result: 'ignored' });
            process.stderr.write(
                'line one\nsecret token=ghp_abcdefghijklmnopqrstuvwxyz0123456789\nlast words');
            process.exitCode = 3;
            break;
        case 'garbage':
            process.stdout.write('not json\n');
            break;
        case 'chatty': {
            const head = 'Hello world\n\u0007 using ghp_abcdefghijklmnopqrstuvwxyz0123456789\n';
            process.stdout.write(head + 'blah '.repeat(200).slice(0, 1000 - head.length));
            break;
        }
        case 'empty':
            break;
        case 'quiet':
            process.stderr.write('starting\nconfig file missing: /nowhere/tool.toml\n');
            break;
        case 'big': {
            const n = Number.isInteger(args.bytes) && args.bytes >= 0 ? args.bytes : 0;
            // Written in one go: stdout to a pipe is synchronous in Node on Linux.
            process.stdout.write('{"result":"' + 'x'.repeat(n) + '"}\n');
            break;
        }
        case 'sleep':
            setTimeout(() => answer({ result: 'slept' }), Number(args.ms) || 0);
            break;
        case 'env':
            answer({ result: process.env });
            break;
        case 'cwd':
            answer({ result: process.cwd() });
            break;
        case 'fds':
            answer({ result: Object.keys(openFds()).map(Number) });
            break;
        case 'fd_targets':
            answer({ result: openFds() });
            break;
        case 'stdin':
            answer({ result: stdin });
            break;
        case 'pem':
            process.stderr.write(
                'loading key\n-----BEGIN OPENSSH PRIVATE KEY-----\n' +
                'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n' +
                'QyNTUxOQAAACDcm8gJ0Lw5BGQyFkvLHqFo3Wj9V3jRk7LxyXZwAAAAJjAM5fMAzXz\n' +
                '-----END OPENSSH PRIVATE KEY-----\nfailed to load\n');
            process.exitCode = 1;
            break;
        case 'daemon': {
            const { spawn } = await import('node:child_process');
            const ms = Number(args.ms) || 30000;
            // setsid: its own session, so no process-group kill reaches it; it keeps our
            // stdout and stderr open.
            const child = spawn('setsid', ['sleep', String(ms / 1000)], {
                stdio: ['ignore', 'inherit', 'inherit'], detached: false });
            child.unref();
            if (args.pid_file) fs.appendFileSync(args.pid_file, `${child.pid}\n`);
            answer({ result: 'answered' });
            break;
        }
        case 'twice':
            answer({ result: 1 });
            answer({ result: 2 });
            break;
        default:
            answer({ error: `unknown mode ${JSON.stringify(args.mode)}` });
    }
}
