#!/usr/bin/env node
// One-shot exec tool for the sandbox tests (docs/protocol.md §15): tries one thing the kernel
// sandbox may forbid and reports what happened, never failing itself.
//   {"action":"write","path":P}        writes P ("parents":true: makes its folders first)
//   {"action":"connect","port":N}      TCP connect to 127.0.0.1:N
//   {"action":"spawn"}                 runs /bin/sh -c true
//   {"action":"tmpdir"}                writes a file in $TMPDIR
//   {"action":"read","path":P}         reads P ("text": what it holds)
//   {"action":"unix","path":P}         connects to the Unix socket P
//   {"action":"env"}                   its TMPDIR, XDG_CACHE_HOME, XDG_CONFIG_HOME, npm_config_cache
//   {"action":"rename","path":P,"to":Q} renames P to Q (and back when it worked)
//   {"action":"egress","via":"connect"|"socks5"|"direct","host":H,"port":N}
//                                      reaches H:N through the proxy $HTTPS_PROXY names (HTTP
//                                      CONNECT or SOCKS5) or directly, sends "ping\n" and
//                                      answers {done, received} or {done:false, code}
// Answers {"result":{"done":true|false,"code":"EACCES"|...}}; with "fail":true a refusal is
// thrown as a tool would (its message on stderr, exit status 1) instead.
// With --server it is a long-running exec server (JSON-RPC `execute`, one request per line).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { spawnSync } from 'node:child_process';


/// Connects to host:port through the proxy (or directly), sends "ping\n", reads what comes
/// back for 500 ms or until the peer closes.
async function egress({ via, host, port, fail }, { answer, refused }) {
    const proxy = new URL(process.env.HTTPS_PROXY ?? 'http://127.0.0.1:1');
    const target = via === 'direct' ? { host, port } : { host: proxy.hostname, port: Number(proxy.port) };
    const s = net.connect(target);
    const connected = await new Promise((resolve) => {
        s.once('connect', () => resolve(true));
        s.once('error', (e) => { refused(e); resolve(false); });
    });
    if (!connected) return;
    s.on('error', () => {});
    let buf = Buffer.alloc(0);
    const next = () => new Promise((resolve) => {
        const on = (d) => { buf = Buffer.concat([buf, d]); s.off('data', on); resolve(); };
        s.on('data', on);
        s.once('end', resolve);
    });
    if (via === 'connect') {
        s.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
        while (!buf.includes('\r\n\r\n') && !s.readableEnded) await next();
        const head = buf.toString('latin1');
        const status = head.split(' ')[1];
        if (status !== '200') {
            s.destroy();
            const body = head.slice(head.indexOf('\r\n\r\n') + 4).trim();
            // As a runtime reports it (undici: "fetch failed"), with "fail":true.
            if (fail) return refused(new Error(`fetch failed (HTTP ${status} from the proxy)`));
            return answer({ done: false, code: `HTTP ${status}`, body });
        }
        buf = buf.subarray(head.indexOf('\r\n\r\n') + 4);
    } else if (via === 'socks5') {
        s.write(Buffer.from([5, 1, 0]));
        while (buf.length < 2) await next();
        buf = buf.subarray(2);
        const name = Buffer.from(host);
        s.write(Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), name, Buffer.from([port >> 8, port & 255])]));
        while (buf.length < 10 && !s.readableEnded) await next();
        if (buf[1] !== 0) { s.destroy(); return answer({ done: false, code: `SOCKS5 ${buf[1]}` }); }
        buf = buf.subarray(10);
    }
    s.write('ping\n');
    const until = Date.now() + 500;
    while (!buf.toString().includes('pong') && Date.now() < until && !s.readableEnded)
        await Promise.race([next(), new Promise((r) => setTimeout(r, 50))]);
    s.destroy();
    answer({ done: true, received: buf.toString() });
}

/// Does what `args` asks; answers through `answer(result)` or `refused(error)`.
async function act(args, answer, refused) {
    try {
        switch (args.action) {
        case 'write':
            if (args.parents) fs.mkdirSync(path.dirname(args.path), { recursive: true });
            fs.writeFileSync(args.path, 'written by sandbox_probe\n');
            answer({ done: true });
            break;
        case 'rename':
            fs.renameSync(args.path, args.to);
            fs.renameSync(args.to, args.path);
            answer({ done: true });
            break;
        case 'egress':
            await egress(args, { answer, refused });
            break;
        case 'tmpdir': {
            const p = path.join(process.env.TMPDIR ?? '/tmp', 'probe.txt');
            fs.writeFileSync(p, 'x');
            answer({ done: true, path: p });
            break;
        }
        case 'read':
            answer({ done: true, text: fs.readFileSync(args.path, 'utf8') });
            break;
        case 'unix': {
            const s = net.connect({ path: args.path });
            s.on('connect', () => { answer({ done: true }); s.destroy(); });
            s.on('error', refused);
            break;
        }
        case 'env': {
            const out = { done: true };
            for (const k of ['TMPDIR', 'XDG_CACHE_HOME', 'XDG_CONFIG_HOME', 'npm_config_cache'])
                out[k] = process.env[k] ?? null;
            answer(out);
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
}

if (process.argv.includes('--server')) {
    // As an exec server (kind = "exec-server"): JSON-RPC `execute` requests, one per line,
    // each answered by id; a refusal is an answer, never an exit.
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', (line) => {
        let msg;
        try { msg = JSON.parse(line); } catch { return; }
        if (msg?.method !== 'execute' || !('id' in msg)) return;
        const answer = (result) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }) + '\n');
        act(msg.params?.args ?? {}, answer, (e) => answer({ done: false, code: e.code ?? String(e) }));
    });
} else {
    const input = JSON.parse(fs.readFileSync(0, 'utf8') || '{}');
    const args = input.args ?? {};
    const answer = (result) => process.stdout.write(JSON.stringify({ result }) + '\n');
    const refused = (e) => {
        if (!args.fail) return answer({ done: false, code: e.code ?? String(e) });
        process.stderr.write(`Error: ${e.message}\n`);
        process.exit(1);
    };
    await act(args, answer, refused);
}
