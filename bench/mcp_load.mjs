#!/usr/bin/env node
// bench/mcp_load.mjs — the MCP load client of scenario (j): the official TypeScript SDK's
// Client over StdioClientTransport (from tests/mcp/node_modules, pinned by tests/mcp's
// package.json and lock), calling one tool with `depth` calls in flight.
//
//   node bench/mcp_load.mjs --mode direct|meith --depth N [--duration S] [--warmup S]
//        [--tool NAME] [--payload BYTES] [--daemon-pid PID] [--echo everything|plain]
//        [--url URL] [--server-pid PID] -- COMMAND [ARGS...]
//
// --url: direct to a Streamable HTTP server (the SDK's StreamableHTTPClientTransport) instead
// of spawning COMMAND; --server-pid: that server's process, counted as the MCP server (also
// through meith, where meithd's child is meith-remote and the server is not its descendant);
// --echo plain: the tool takes {text} and answers it as is (tests/mcp/http_server.mjs's echo).
//
// COMMAND is what the transport spawns: the MCP server itself (direct) or `meith mcp …`
// (meith, with --daemon-pid the meithd it talks to). After --warmup seconds the window of
// --duration seconds starts; a call that completes starts the next one, so `depth` calls are
// always in flight. Every result is checked: not isError, content[0].text is exactly
// "Echo: " + the message sent (server-everything's echo), the message unique per call.
// Latency is per call, from callTool() to its promise settling (process.hrtime), for calls
// started and completed inside the window. Any error (warm-up, window or the drain after it)
// counts.
//
// Prints one JSON line, the fields of bench/loadgen.cpp plus the CPU of each process in the
// chain over the window: client_cpu_s (this process), bridge_cpu_s (`meith mcp`),
// meithd_cpu_s, mcp_server_cpu_s (the MCP server: direct, the spawned process; meith,
// meithd's descendants); server_cpu_s/children_cpu_s as loadgen (meithd and its children,
// or the direct server); other_cpu_s (machine busy time minus the chain) and
// other_procs_cpu_s (other processes), the disturbance check of bench/run; sleeps_per_call,
// each process's voluntary context switches per call.
// Exit status 0 when every call succeeded.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SDK = path.join(ROOT, 'tests/mcp/node_modules/@modelcontextprotocol/sdk/dist/esm');
const { Client } = await import(pathToFileURL(path.join(SDK, 'client/index.js')).href);
const { StdioClientTransport } = await import(pathToFileURL(path.join(SDK, 'client/stdio.js')).href);

// ------------------------------------------------------------------------------------------
// Arguments

const o = { mode: 'direct', depth: 1, duration: 3, warmup: 1, tool: 'echo', payload: 64, daemonPid: 0, cmd: [],
            url: '', serverPid: 0, echo: 'everything' };
{
    const a = process.argv.slice(2);
    for (let i = 0; i < a.length; i++) {
        const v = () => {
            if (i + 1 >= a.length) die(`${a[i]} needs a value`);
            return a[++i];
        };
        switch (a[i]) {
            case '--mode': o.mode = v(); break;
            case '--depth': o.depth = Number(v()); break;
            case '--duration': o.duration = Number(v()); break;
            case '--warmup': o.warmup = Number(v()); break;
            case '--tool': o.tool = v(); break;
            case '--payload': o.payload = Number(v()); break;
            case '--daemon-pid': o.daemonPid = Number(v()); break;
            case '--url': o.url = v(); break;
            case '--server-pid': o.serverPid = Number(v()); break;
            case '--echo': o.echo = v(); break;
            case '--': o.cmd = a.slice(i + 1); i = a.length; break;
            default: die(`unknown argument ${a[i]}`);
        }
    }
    if (!['direct', 'meith'].includes(o.mode)) die('--mode must be direct or meith');
    if (!(o.depth >= 1) || !(o.duration > 0) || !(o.warmup >= 0) || !(o.payload >= 16)) die('bad --depth/--duration/--warmup/--payload');
    if (!o.cmd.length && !(o.url && o.mode === 'direct')) die('no command after -- (or --url in direct mode)');
    if (!['everything', 'plain'].includes(o.echo)) die('--echo must be everything or plain');
    if (o.mode === 'meith' && !o.daemonPid) die('--mode meith needs --daemon-pid');
}

function die(msg) {
    process.stderr.write(`mcp_load: ${msg}\n`);
    process.exit(2);
}

// ------------------------------------------------------------------------------------------
// /proc (as bench/loadgen.cpp: utime+stime per process; machine busy time as elapsed × cores
// − idle − iowait − steal, idle being exact on this NO_HZ kernel)

const HZ = 100; // USER_HZ: the unit of /proc/*/stat and /proc/stat on Linux, whatever CONFIG_HZ is
const NCPU = (() => {
    const s = fs.readFileSync('/proc/stat', 'utf8');
    return s.split('\n').filter((l) => /^cpu\d/.test(l)).length;
})();

function statFields(pid) {
    let s;
    try { s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8'); } catch { return null; }
    const rp = s.lastIndexOf(')');
    return rp < 0 ? null : s.slice(rp + 2).trim().split(' '); // [0] is field 3 (state)
}
function allProcs() {
    const m = new Map();
    for (const e of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(e)) continue;
        const f = statFields(e);
        if (!f || f.length < 20) continue;
        m.set(Number(e), { ppid: Number(f[1]), start: f[19], self: (Number(f[11]) + Number(f[12])) / HZ,
            reaped: (Number(f[13]) + Number(f[14])) / HZ });
    }
    return m;
}
function descendants(procs, roots) {
    const out = [];
    const frontier = [...roots];
    const seen = new Set(roots);
    while (frontier.length) {
        const p = frontier.pop();
        for (const [pid, x] of procs) {
            if (x.ppid === p && !seen.has(pid)) { seen.add(pid); out.push(pid); frontier.push(pid); }
        }
    }
    return out;
}
function machine() {
    const l = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    // cpu user nice system idle iowait irq softirq steal
    return { at: process.hrtime.bigint(), idle: (l[4] + l[5]) / HZ, steal: l[8] / HZ };
}
function clientCpu() {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
}

// The chain's processes, fixed at the start of the window.
function chainPids(procs, transportPid) {
    const c = { bridge: [], meithd: [], server: [] };
    if (o.mode === 'direct') {
        c.server = transportPid ? [transportPid, ...descendants(procs, [transportPid])] : [];
    } else {
        c.bridge = [transportPid, ...descendants(procs, [transportPid])];
        c.meithd = [o.daemonPid];
        c.server = descendants(procs, [o.daemonPid]);
    }
    if (o.serverPid) c.server.push(o.serverPid, ...descendants(procs, [o.serverPid]));
    return c;
}
// Voluntary context switches of a process's main thread: one per time it blocked waiting for
// input, i.e. one sleep and wake-up, the cost that grows with every process a message passes
// through (involuntary ones, preemption by other processes, are left out).
function ctxsw(pid) {
    let s;
    try { s = fs.readFileSync(`/proc/${pid}/status`, 'utf8'); } catch { return 0; }
    return Number(s.match(/^voluntary_ctxt_switches:\s*(\d+)/m)?.[1] ?? 0);
}
function snapshot(chain) {
    const procs = allProcs();
    const sum = (pids) => pids.reduce((n, p) => n + (procs.get(p)?.self ?? 0), 0);
    const cs = (pids) => pids.reduce((n, p) => n + ctxsw(p), 0);
    return { procs, m: machine(), client: clientCpu(), bridge: sum(chain.bridge), meithd: sum(chain.meithd), server: sum(chain.server),
        cs: { client: ctxsw(process.pid), bridge: cs(chain.bridge), meithd: cs(chain.meithd), server: cs(chain.server) } };
}
// CPU seconds of the processes not in `ours` over the window, and the three that used most
// themselves.
function othersCpu(a, b, ours) {
    let sum = 0;
    const each = [];
    for (const [pid, pb] of b.procs) {
        if (ours.has(pid)) continue;
        const pa = a.procs.get(pid);
        const used = pa && pa.start === pb.start ? (pb.self - pa.self) + (pb.reaped - pa.reaped) : pb.self + pb.reaped;
        sum += used;
        // ranked by its own CPU: a parent's reaped children (cutime) would count whole builds
        const self = pa && pa.start === pb.start ? pb.self - pa.self : pb.self;
        if (self > 0) each.push([pid, self]);
    }
    const top = each.sort((x, y) => y[1] - x[1]).slice(0, 3).map(([pid, used]) => {
        let comm = '?';
        try { comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { /* gone */ }
        return { pid, comm, cpu_s: Number(used.toFixed(3)) };
    });
    return { sum, top };
}

// ------------------------------------------------------------------------------------------
// The run

const transport = o.url
    ? new (await import(pathToFileURL(path.join(SDK, 'client/streamableHttp.js')).href)).StreamableHTTPClientTransport(new URL(o.url))
    : new StdioClientTransport({ command: o.cmd[0], args: o.cmd.slice(1), stderr: 'inherit' });
const client = new Client({ name: `meith-bench-${o.mode}`, version: '0.0.0' });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
if (!tools.includes(o.tool)) die(`the server does not list ${o.tool} (it lists ${tools.length} tools: ${tools.slice(0, 20).join(', ')}…)`);

const fill = 'x'.repeat(o.payload);
let seq = 0;
let calls = 0, errors = 0, firstError = '';
let measuring = false, stopping = false;
let winStartNs = 0n;
const lat = [];
let inflight = 0;
let drained = null;

function noteError(msg) {
    errors++;
    if (!firstError) firstError = msg.slice(0, 300);
}
function issue() {
    const n = seq++;
    const message = (String(n) + ':' + fill).slice(0, o.payload);
    const t0 = process.hrtime.bigint();
    const counted = measuring;
    inflight++;
    const args = o.echo === 'plain' ? { text: message } : { message };
    const expected = o.echo === 'plain' ? message : `Echo: ${message}`;
    client.callTool({ name: o.tool, arguments: args }).then((r) => {
        const t1 = process.hrtime.bigint();
        const text = r?.content?.[0]?.text;
        if (r?.isError || text !== expected) {
            noteError(`call ${n}: unexpected result ${JSON.stringify(r).slice(0, 200)}`);
        } else if (measuring) {
            calls++;
            if (counted) lat.push(Number(t1 - t0)); // started and completed in the window
        }
    }, (e) => {
        noteError(`call ${n}: ${e?.message ?? e}`);
    }).finally(() => {
        inflight--;
        if (!stopping) issue();
        else if (inflight === 0 && drained) drained();
    });
}

for (let i = 0; i < o.depth; i++) issue();
await new Promise((r) => setTimeout(r, o.warmup * 1000));
// Only now is the chain complete (meith mcp has connected, meithd has spawned its server).
const chain = chainPids(allProcs(), transport.pid);
const s0 = snapshot(chain);
winStartNs = process.hrtime.bigint();
const errorsBefore = errors;
measuring = true;
await new Promise((r) => setTimeout(r, o.duration * 1000));
measuring = false;
const winEndNs = process.hrtime.bigint();
const s1 = snapshot(chain);
stopping = true;
if (inflight > 0) {
    await Promise.race([new Promise((r) => { drained = r; }), new Promise((r) => setTimeout(r, 10000).unref())]);
}
// The SDK's close: end the child's stdin, wait up to 2 s for it to exit, then SIGTERM (and
// SIGKILL 2 s later). close_ms says how long the spawned process took to go.
const closeT0 = process.hrtime.bigint();
try { await client.close(); } catch { /* the transport kills the process */ }
const closeMs = Number(process.hrtime.bigint() - closeT0) / 1e6;

// ------------------------------------------------------------------------------------------
// Result

lat.sort((a, b) => a - b);
const pct = (q) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] / 1000 : 0);
const secs = Number(winEndNs - winStartNs) / 1e9;
const cpuSecs = Number(s1.m.at - s0.m.at) / 1e9;
const busy = cpuSecs * NCPU - (s1.m.idle - s0.m.idle) - (s1.m.steal - s0.m.steal);
const d = (k) => s1[k] - s0[k];
const client_cpu = d('client'), bridge = d('bridge'), meithd = d('meithd'), server = d('server');
const other = busy - client_cpu - bridge - meithd - server;
const ours = new Set([process.pid, ...chain.bridge, ...chain.meithd, ...chain.server]);
const others = othersCpu(s0, s1, ours);
const otherProcs = Math.min(others.sum, Math.max(other, 0));
const mean = lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length / 1000 : 0;
const f = (x, n) => Number(x.toFixed(n));
const out = {
    calls, errors, seconds: f(secs, 3), calls_per_s: f(secs > 0 ? calls / secs : 0, 1),
    p50_us: f(pct(0.5), 1), p99_us: f(pct(0.99), 1), p999_us: f(pct(0.999), 1), max_us: f(lat.length ? lat[lat.length - 1] / 1000 : 0, 1),
    mean_us: f(mean, 1), latency_samples: lat.length,
    client_cpu_s: f(client_cpu, 3),
    server_cpu_s: f(o.mode === 'direct' ? server : meithd, 3),
    children_cpu_s: f(o.mode === 'direct' ? 0 : server, 3),
    bridge_cpu_s: f(bridge, 3), meithd_cpu_s: f(meithd, 3), mcp_server_cpu_s: f(server, 3),
    other_cpu_s: f(other, 3), other_procs_cpu_s: f(otherProcs, 3), top_other_procs: others.top,
    // voluntary context switches (sleeps) per call of each process's main thread in the window
    sleeps_per_call: Object.fromEntries(Object.keys(s0.cs).map((k) => [k, f(calls ? (s1.cs[k] - s0.cs[k]) / calls : 0, 2)])),
    chain_pids: { bridge: chain.bridge.length, meithd: chain.meithd.length, server: chain.server.length },
    warmup_errors: errorsBefore, close_ms: f(closeMs, 1),
    mode: `mcp-${o.mode}`, tool: o.tool, connections: 1, depth: o.depth, payload: o.payload, warmup_s: o.warmup,
};
if (firstError) out.first_error = firstError;
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(errors === 0 && calls > 0 ? 0 : 1);
