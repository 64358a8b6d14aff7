#!/usr/bin/env node
// bench/source_start.mjs — how long each source of (h) takes to start on its own: from spawn to
// the first answer that means "ready" as meithd counts it, without meithd in between.
//
//   node bench/source_start.mjs --iterations 5 --source NAME KIND CMD [ARG...] [--source ...]
//
// KIND host: sends the tool-host handshake meithd sends (init, then get_tool_schemas) and stops
// the clock at the schemas reply. KIND exec-server: sends one JSON-RPC `execute` and stops at
// its answer (meithd itself counts an exec server ready once spawned, so this is its slowest
// honest reading). Prints one JSON line:
//   {"mode":"source_start","sources":[{"name","kind","samples_ms":[...],"p50_ms"}],"slowest_p50_ms"}
import { spawn } from 'node:child_process';

const argv = process.argv.slice(2);
let iterations = 5;
const sources = [];
for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--iterations') iterations = Number(argv[++i]);
    else if (argv[i] === '--source') {
        const [name, kind, ...rest] = argv.slice(i + 1);
        const end = rest.indexOf('--source');
        const cmd = end < 0 ? rest : rest.slice(0, end);
        sources.push({ name, kind, cmd });
        i += 2 + cmd.length;
    }
}

function once({ kind, cmd }) {
    return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        const child = spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'ignore'] });
        const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${cmd.join(' ')}: no answer in 30 s`)); }, 30000);
        let buf = '';
        const done = () => {
            const ms = Number(process.hrtime.bigint() - t0) / 1e6;
            clearTimeout(timer);
            child.stdin.end();
            child.kill('SIGTERM');
            resolve(ms);
        };
        child.on('error', reject);
        child.stdout.on('data', (d) => {
            buf += d;
            let nl;
            while ((nl = buf.indexOf('\n')) >= 0) {
                const line = buf.slice(0, nl);
                buf = buf.slice(nl + 1);
                let msg;
                try { msg = JSON.parse(line); } catch { continue; }
                if (kind === 'host' && msg.id === '1') {
                    child.stdin.write('{"v":1,"id":"2","method":"get_tool_schemas","params":{"config":{}}}\n');
                } else if (msg.id === '2' || (kind !== 'host' && msg.id === 1)) {
                    done();
                }
            }
        });
        if (kind === 'host') child.stdin.write('{"v":1,"id":"1","method":"init","params":{"config":{}}}\n');
        else child.stdin.write('{"jsonrpc":"2.0","id":1,"method":"execute","params":{"args":{"op":"list"}}}\n');
    });
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
const out = [];
for (const s of sources) {
    const samples = [];
    for (let i = 0; i < iterations; i++) {
        samples.push(await once(s));
        await new Promise((r) => setTimeout(r, 100));
    }
    out.push({ name: s.name, kind: s.kind, samples_ms: samples.map((x) => Math.round(x * 100) / 100), p50_ms: median(samples) });
}
console.log(JSON.stringify({ mode: 'source_start', sources: out, slowest_p50_ms: Math.max(...out.map((s) => s.p50_ms)) }));
