#!/usr/bin/env node
// bench (k), a streaming download: the same one-shot exec tool (curl, bench/download_tool.sh)
// fetches --mib MiB from an HTTP server on 127.0.0.1 through one meithd, three ways:
//   off     sandbox = "off": curl connects directly
//   confined  sandboxed with accesses-network, no network table: directly, from the sandbox
//   proxy   sandboxed with a network table: curl's only way out is meithd's egress proxy
//           (docs/protocol.md §19), which relays every byte on meithd's I/O thread
// Each way runs --iterations calls one after another (`meith call`, wall time: the process
// start is noise next to the transfer); meithd's CPU over the calls of each way is read from
// /proc. Prints one JSON line: {"mode":"download","mib":N,"ways":[{"way","p50_ms","mib_s",
// "meithd_cpu_ms_per_gib","samples_ms"}]}.
//   node bench/download.mjs --meithd BIN --meith BIN --work DIR [--mib 256] [--iterations 5]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const arg = (k, d) => {
    const i = process.argv.indexOf(`--${k}`);
    return i > 0 ? process.argv[i + 1] : d;
};
const meithd = arg('meithd');
const meith = arg('meith');
const work = arg('work');
const mib = Number(arg('mib', '256'));
const iterations = Number(arg('iterations', '5'));
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
if (!meithd || !meith || !work) {
    process.stderr.write('usage: download.mjs --meithd BIN --meith BIN --work DIR\n');
    process.exit(2);
}

// The server: --mib MiB of one reused 1 MiB chunk, with back-pressure.
const chunk = Buffer.alloc(1 << 20, 0x61);
const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': mib << 20 });
    let left = mib;
    const more = () => {
        while (left > 0) {
            left--;
            if (!res.write(chunk)) return res.once('drain', more);
        }
        res.end();
    };
    more();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/blob`;

const home = path.join(work, 'home-download');
fs.mkdirSync(home, { recursive: true, mode: 0o700 });
const sock = path.join(work, 'download.sock');
const config = path.join(work, 'download.toml');
const tool = (name, extra) => `[[sources]]
name = "${name}"
kind = "exec"
command = ["sh", "${root}/bench/download_tool.sh"]
tool = { name = "${name}", capabilities = ["accesses-network"] }
sandbox_paths = { exec = ["/usr/bin/curl"] }
${extra}
`;
fs.writeFileSync(config, `# bench (k): a streaming download, three ways (bench/download.mjs)
${tool('dl_off', 'sandbox = "off"')}
${tool('dl_confined', '')}
${tool('dl_proxy', 'network = { allow = ["127.0.0.1"] }')}`);
const daemon = spawn(meithd, ['--home', home, '--socket', sock, '--config', config, '--log-level', 'warn'],
    { stdio: ['ignore', 'ignore', fs.openSync(path.join(work, 'meithd-download.log'), 'a')] });
// Asynchronous: the server above answers in this process's event loop.
const call = (name) => new Promise((resolve) => {
    const p = spawn(meith, ['--home', home, '--socket', sock, '--no-autostart', 'call', name,
        '--timeout-ms', '120000', JSON.stringify({ url })]);
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (status) => resolve({ status, stdout, stderr }));
});
const cpuMs = () => {
    const f = fs.readFileSync(`/proc/${daemon.pid}/stat`, 'utf8');
    const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, 100 Hz
};

try {
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 100));
    const ways = [];
    for (const [way, name] of [['off', 'dl_off'], ['confined', 'dl_confined'], ['proxy', 'dl_proxy']]) {
        const warm = await call(name); // the first run pays for page cache and sandbox memory
        if (warm.status !== 0 || !warm.stdout.includes(`${mib << 20}`))
            throw new Error(`${name}: ${warm.stdout}${warm.stderr}`.trim().slice(0, 400));
        const samples = [];
        const cpu0 = cpuMs();
        for (let i = 0; i < iterations; i++) {
            const t0 = process.hrtime.bigint();
            const r = await call(name);
            const ms = Number(process.hrtime.bigint() - t0) / 1e6;
            if (r.status !== 0 || !r.stdout.includes(`${mib << 20}`))
                throw new Error(`${name}: ${r.stdout}${r.stderr}`.trim().slice(0, 400));
            samples.push(ms);
        }
        const cpu = cpuMs() - cpu0;
        const sorted = [...samples].sort((a, b) => a - b);
        const p50 = sorted[Math.floor(sorted.length / 2)];
        ways.push({ way, p50_ms: +p50.toFixed(1), mib_s: +((mib * 1000) / p50).toFixed(0),
            meithd_cpu_ms_per_gib: +((cpu / (mib * iterations)) * 1024).toFixed(0),
            samples_ms: samples.map((x) => +x.toFixed(1)) });
    }
    process.stdout.write(JSON.stringify({ mode: 'download', mib, iterations, ways }) + '\n');
} finally {
    daemon.kill('SIGTERM');
    server.close();
    server.closeAllConnections?.();
}
