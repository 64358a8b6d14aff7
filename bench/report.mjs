#!/usr/bin/env node
// bench/report.mjs — turns bench/results/runs.jsonl (written by bench/run) into the table on
// stdout, bench/results/latest.json and docs/benchmarks.md.
//
//   node bench/report.mjs --runs F --machine F [--failures F] [--json F] [--doc F] [--elapsed S]
//                         [--carry OLD_DOC --only LIST]
//
// --carry: the runs of scenarios not in --only (bench/run --only) are taken from the raw data
// of OLD_DOC (the docs/benchmarks.md this run replaces), tagged with the run they came from.

import fs from 'node:fs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];

const machine = JSON.parse(fs.readFileSync(args.machine, 'utf8'));
const lines = fs.readFileSync(args.runs, 'utf8').split('\n').filter(Boolean);
// bench/run --only: the other scenarios' runs from the page being replaced.
const carried = { lines: [], scenarios: new Set(), from: new Set() };
if (args.carry && args.only && fs.existsSync(args.carry)) {
    const old = fs.readFileSync(args.carry, 'utf8');
    const only = new Set(args.only.split(','));
    const date = old.match(/^- Date: ([^;]+);/m)?.[1] ?? '?';
    const commit = old.match(/^- meithd: .*?, commit ([0-9a-f]+)/m)?.[1] ?? '?';
    const raw = old.slice(old.indexOf('## Raw data')).match(/```json\n([\s\S]*?)\n```/)?.[1] ?? '';
    for (const l of raw.split('\n').filter(Boolean)) {
        let r;
        try { r = JSON.parse(l); } catch { continue; }
        if (!r.scenario || only.has(r.scenario)) continue;
        r.carried_from ??= { date, commit };
        carried.scenarios.add(r.scenario);
        carried.from.add(`${r.carried_from.date} (commit ${r.carried_from.commit})`);
        carried.lines.push(JSON.stringify(r));
    }
    lines.unshift(...carried.lines);
}
const runs = lines.map((l) => JSON.parse(l));
const failures = args.failures && fs.existsSync(args.failures)
    ? fs.readFileSync(args.failures, 'utf8').split('\n').filter(Boolean) : [];

const median = (xs) => {
    const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
    if (!v.length) return NaN;
    const m = Math.floor(v.length / 2);
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

// ------------------------------------------------------------------------------------------
// Load scenarios

const LOAD = {
    a: 'ping-pong: 1 connection × depth 1, echo',
    b: 'pipelined: 4 connections × depth 16, echo',
    c: '64 connections × depth 4, echo',
    d: 'as (b) through a tool host (t_echo, tests/hosts/test_host.mjs)',
    e: 'audit off ([audit] enabled = false: no line built, redacted or written), repeating (a), (b), (c) and (d)',
};
const LOAD_SHORT = { a: 'ping-pong, echo', b: '4 × 16, echo', c: '64 × 4, echo', d: '4 × 16, tool host' };
const ORDER = [
    ['a', 'raw'], ['a', 'node'], ['a', 'mcp'], ['a', 'meithd'],
    ['b', 'raw'], ['b', 'node'], ['b', 'mcp'], ['b', 'meithd'],
    ['c', 'raw'], ['c', 'node'], ['c', 'meithd'],
    ['d', 'meithd+host'],
    ['d', 'meithd+node-sdk'],
    ['d', 'meithd+python-sdk'],
    ['e', 'meithd-audit-off-a'],
    ['e', 'meithd-audit-off'],
    ['e', 'meithd-audit-off-c'],
    ['e', 'meithd+host-audit-off'],
    ['k', 'oneshot-sandbox'],
    ['k', 'oneshot-nosandbox'],
    ['k', 'oneshot-network'],
    ['k', 'oneshot-egress-proxy'],
];
// (e): each audit-off row and the audit-on row of the load it repeats.
const AUDIT_PAIRS = [
    ['a', 'meithd', 'meithd-audit-off-a'],
    ['b', 'meithd', 'meithd-audit-off'],
    ['c', 'meithd', 'meithd-audit-off-c'],
    ['d', 'meithd+host', 'meithd+host-audit-off'],
];
/// The load scenario a row ran: its own, or for (e) the one it repeats.
const loadOf = (scenario, server) =>
    scenario === 'e' ? (AUDIT_PAIRS.find((p) => p[2] === server)?.[0] ?? 'b') : scenario;
const SERVER_NAMES = {
    raw: 'raw echo (C++, epoll)',
    node: 'node server',
    mcp: 'MCP SDK (stdio)',
    meithd: 'meithd (audit on)',
    'meithd+host': 'meithd + test host',
    'meithd+node-sdk': 'meithd + a Node.js SDK host (runToolHost)',
    'meithd+python-sdk': 'meithd + a Python SDK host (meith_tools)',
    'meithd-audit-off-a': 'meithd (audit off), as (a)',
    'meithd-audit-off': 'meithd (audit off), as (b)',
    'meithd-audit-off-c': 'meithd (audit off), as (c)',
    'meithd+host-audit-off': 'meithd + test host (audit off), as (d)',
    'oneshot-sandbox': 'meithd + one-shot exec tool, sandboxed',
    'oneshot-nosandbox': 'meithd + one-shot exec tool, sandbox off',
    'oneshot-network': 'meithd + one-shot exec tool with accesses-network, sandboxed',
    'oneshot-egress-proxy': 'the same with a `network` table: a network namespace and the egress proxy per run',
};

function aggregate(s, srv) {
    const all = runs.filter((r) => r.scenario === s && r.server === srv);
    if (!all.length) return undefined;
    const kept = all.filter((r) => r.status === 'ok' || r.status === 'disturbed_kept');
    const failed = all.filter((r) => r.status === 'failed');
    const cores = (k) => median(kept.map((r) => r[k] / r.seconds));
    return {
        scenario: s, server: srv,
        runs: kept.length, failed: failed.length,
        disturbed_attempts: all.filter((r) => r.status === 'disturbed').length,
        disturbed_kept: all.filter((r) => r.status === 'disturbed_kept').length,
        calls_per_s: median(kept.map((r) => r.calls_per_s)),
        calls_per_s_min: Math.min(...kept.map((r) => r.calls_per_s)),
        calls_per_s_max: Math.max(...kept.map((r) => r.calls_per_s)),
        p50_us: median(kept.map((r) => r.p50_us)),
        p99_us: median(kept.map((r) => r.p99_us)),
        p999_us: median(kept.map((r) => r.p999_us)),
        server_cores: cores('server_cpu_s'),
        children_cores: cores('children_cpu_s'),
        client_cores: cores('client_cpu_s'),
        other_procs_cores: cores('other_procs_cpu_s'),
        kernel_cores: median(kept.map((r) => (r.other_cpu_s - r.other_procs_cpu_s) / r.seconds)),
        server_cpu_us_per_call: median(kept.map((r) => ((r.server_cpu_s + r.children_cpu_s) / r.calls) * 1e6)),
        client_cpu_us_per_call: median(kept.map((r) => (r.client_cpu_s / r.calls) * 1e6)),
        // the server process alone (meithd without its tool host), for the (d) target
        own_cpu_us_per_call: median(kept.map((r) => (r.server_cpu_s / r.calls) * 1e6)),
        // its child processes alone (a tool host's own cost per call)
        children_cpu_us_per_call: median(kept.map((r) => (r.children_cpu_s / r.calls) * 1e6)),
        errors: all.reduce((n, r) => n + (r.errors || 0), 0),
        kept,
    };
}
const rows = {};
for (const [s, srv] of ORDER) {
    const r = aggregate(s, srv);
    if (r) rows[`${s}/${srv}`] = r;
}
const row = (s, srv) => rows[`${s}/${srv}`];
const ratio = (x, y) => (x && y && Number.isFinite(x) && Number.isFinite(y) ? x / y : NaN);
for (const r of Object.values(rows)) {
    const load = loadOf(r.scenario, r.server);
    const raw = row(load === 'd' ? 'b' : load, 'raw');
    r.x_raw_calls = ratio(r.calls_per_s, raw?.calls_per_s);
    r.x_raw_p50 = ratio(r.p50_us, raw?.p50_us);
    const node = row(load === 'd' ? 'b' : load, 'node');
    r.x_node_calls = r.server.startsWith('meithd') ? ratio(r.calls_per_s, node?.calls_per_s) : NaN;
}

// ------------------------------------------------------------------------------------------
// (j) MCP through meith: the SDK client → `meith mcp` → meithd → server-everything, beside the
// same client → server-everything over stdio, by calls in flight.

const J_DEPTHS = [1, 16];
const J_PATHS = [['direct', 'direct (client → server)'], ['meith', 'through meith (client → meith mcp → meithd → server)'],
    ['remote-direct', 'remote, direct (client → HTTP server on 127.0.0.1)'],
    ['remote-meith', 'remote, through meith (client → meith mcp → meithd → meith-remote → HTTP server)']];
const jRows = {};
for (const depth of J_DEPTHS) {
    for (const [path] of J_PATHS) {
        const r = aggregate('j', `${path}-d${depth}`);
        if (!r) continue;
        const perCall = (k) => median(r.kept.map((x) => ((x[k] ?? 0) / x.calls) * 1e6));
        const cores = (f) => median(r.kept.map((x) => f(x) / x.seconds));
        Object.assign(r, {
            path, depth,
            us_client: perCall('client_cpu_s'), us_bridge: perCall('bridge_cpu_s'), us_meithd: perCall('meithd_cpu_s'),
            us_server: perCall('mcp_server_cpu_s'),
            us_unattributed: median(r.kept.map((x) => ((x.other_cpu_s - x.other_procs_cpu_s) / x.calls) * 1e6)),
            us_chain: median(r.kept.map((x) => ((x.client_cpu_s + x.bridge_cpu_s + x.meithd_cpu_s + x.mcp_server_cpu_s) / x.calls) * 1e6)),
            // by pinning: CPU 0 holds the client (and meith mcp), CPU 1 the answering side
            cpu0_cores: cores((x) => x.client_cpu_s + x.bridge_cpu_s),
            cpu1_cores: cores((x) => x.meithd_cpu_s + x.mcp_server_cpu_s),
            sleeps: Object.fromEntries(['client', 'bridge', 'meithd', 'server'].map((k) => [k, median(r.kept.map((x) => x.sleeps_per_call?.[k]))])),
        });
        jRows[`${path}-d${depth}`] = r;
    }
}
const jRatio = (depth, k, pre = '') => ratio(jRows[`${pre}meith-d${depth}`]?.[k], jRows[`${pre}direct-d${depth}`]?.[k]);

// ------------------------------------------------------------------------------------------
// Other scenarios

const one = (s, mode) =>
    runs.find((r) => r.scenario === s && r.mode === mode && (r.status === 'ok' || r.status === 'disturbed_kept'));
const f = one('f', 'list_tools');
const g = one('g', 'idle');
const fSearch = runs.find((r) => r.scenario === 'f' && r.mode === 'search' && (r.status === 'ok' || r.status === 'disturbed_kept'));
const h = one('h', 'startup');
const hNode = one('h', 'node_startup');
const hAlone = runs.find((r) => r.scenario === 'h' && r.mode === 'source_start' && r.status === 'ok');
const i = one('i', 'idle_rss');
// (l) what a person waits for (bench/waits.cpp).
const lRun = (srv) => runs.find((r) => r.scenario === 'l' && r.server === srv && (r.status === 'ok' || r.status === 'disturbed_kept'));
const lCall = lRun('call'), lMcp = lRun('mcp'), lDaemon = lRun('daemon'), lMany = lRun('mcp-many');
// (m) eight sources, eager and on demand (bench/waits.cpp --mode daemon --mcp --rss).
const mRun = (srv) => runs.find((r) => r.scenario === 'm' && r.server === srv && (r.status === 'ok' || r.status === 'disturbed_kept'));
const mEager = mRun('eager'), mOnDemand = mRun('on-demand'), mCold = mRun('cold-call'), mWarm = mRun('warm-call');
// (k) the kernel sandbox's cost: start-up of the (h) sources confined and not.
const kStart = (v) => runs.find((r) => r.scenario === 'k' && r.server === `startup-${v}` && r.mode === 'startup' &&
    (r.status === 'ok' || r.status === 'disturbed_kept'));
const kOn = kStart('sandbox'), kOff = kStart('nosandbox');
const kDownload = runs.find((r) => r.scenario === 'k' && r.mode === 'download' && r.status === 'ok');
const kWay = (w) => kDownload?.ways?.find((x) => x.way === w);
const nodeStartMs = hNode ? median(hNode.samples_us) / 1000 : NaN;
// (e) floor: appending audit-sized lines and nothing else; and what it leaves of audit off.
const floors = runs.filter((r) => r.mode === 'append_floor').sort((x, y) => x.batch - y.batch);
// (e) the redacted summary of one tool result, by size and kind.
const summaryCost = one('e', 'summary_cost');
const sizeText = (b) => (b >= 1048576 ? `${b / 1048576} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);
const summaryRow = (kind) => (summaryCost?.results ?? []).filter((x) => x.kind === kind)
    .map((x) => `${sizeText(x.bytes)}: ${us(x.us_per_summary)} µs`).join(', ');
const offCpu = row('e', 'meithd-audit-off')?.server_cpu_us_per_call;
const auditByLoad = AUDIT_PAIRS.map(([load, on, off]) => {
    const a = row(load, on);
    const b = row('e', off);
    return {
        load, on: a, off: b,
        ratio: ratio(a?.calls_per_s, b?.calls_per_s),
        p50_ratio: ratio(a?.p50_us, b?.p50_us),
        audit_us: a && b ? a.server_cpu_us_per_call - b.server_cpu_us_per_call : NaN,
    };
});
const ceiling = (fl) => (Number.isFinite(offCpu) ? offCpu / (offCpu + fl.cpu_us_per_line) : NaN);

// ------------------------------------------------------------------------------------------
// Targets

const T = [];
const target = (name, value, shown, limit, pass) =>
    T.push({ name, value, shown, target: limit, result: Number.isFinite(value) ? (pass ? 'PASS' : 'MISS') : 'n/a' });
{
    const v = row('b', 'meithd')?.x_raw_calls;
    target('(b) meithd calls/s ≥ 0.6 × raw echo (audit on)', v, `${fx(v)}×`, '≥ 0.6×', v >= 0.6);
}
{
    const v = row('a', 'meithd')?.x_raw_p50;
    target('(a) meithd p50 ≤ 1.5 × raw echo p50', v, `${fx(v)}×`, '≤ 1.5×', v <= 1.5);
}
{
    // meithd's own CPU per call (not the host's) through the test host, against a built-in call
    const d = row('d', 'meithd+host')?.own_cpu_us_per_call, b = row('b', 'meithd')?.own_cpu_us_per_call;
    const v = ratio(d, b);
    target('(d) meithd CPU per call through a tool host ≤ 1.5 × per built-in call in (b)', v,
        `${fx(d)} / ${fx(b)} µs = ${fx(v)}×`, '≤ 1.5×', v <= 1.5);
}
{
    const v = row('d', 'meithd+host')?.x_node_calls;
    target('(d) calls/s through the test host ≥ 0.8 × the node server (b)', v, `${fx(v)}×`, '≥ 0.8×', v >= 0.8);
}
{
    // The audit trail's CPU per call (audit on − audit off, (b)) against the kernel's floor for
    // appending a line of that size: the lowest floor measured (the largest batch), strictest.
    const x = auditByLoad.find((a) => a.load === 'b');
    const floor = floors.length ? Math.min(...floors.map((fl) => fl.cpu_us_per_line)) : NaN;
    const v = ratio(x?.audit_us, floor);
    target('(e) audit trail CPU per call in (b) ≤ 2 × the kernel floor (append_floor)', v,
        `${fx(x?.audit_us)} / ${fx(floor)} µs = ${fx(v)}×`, '≤ 2×', v <= 2);
}
{
    const v = row('b', 'meithd')?.x_node_calls;
    target('(b) meithd ≥ 3 × node server calls/s', v, `${fx(v)}×`, '≥ 3×', v >= 3);
}
{
    const v = row('c', 'meithd')?.x_node_calls;
    target('(c) meithd ≥ 3 × node server calls/s', v, `${fx(v)}×`, '≥ 3×', v >= 3);
}
{
    // Issue 33's gateway targets (1 in flight: the latency a person feels; 16: the throughput).
    const v = jRatio(1, 'p50_us');
    target('(j) MCP through meith: p50 ≤ 1.3 × direct (1 in flight)', v, fxx(v), '≤ 1.3×', v <= 1.3);
}
{
    const v = jRatio(16, 'calls_per_s');
    target('(j) MCP through meith: calls/s ≥ 0.8 × direct (16 in flight)', v, fxx(v), '≥ 0.8×', v >= 0.8);
}
{
    const v = ratio(row('k', 'oneshot-sandbox')?.calls_per_s, row('k', 'oneshot-nosandbox')?.calls_per_s);
    target('(k) one-shot exec tool calls/s, sandboxed / sandbox off ≥ 0.9', v, fxx(v), '≥ 0.9×', v >= 0.9);
}
{
    // Issue 46's: the latency of a confined one-shot call under load (4 in flight), and with a
    // `network` table (a network namespace and the egress proxy per run).
    const v = ratio(row('k', 'oneshot-sandbox')?.p50_us, row('k', 'oneshot-nosandbox')?.p50_us);
    target('(k) one-shot exec tool p50, sandboxed / sandbox off ≤ 2', v, fxx(v), '≤ 2×', v <= 2);
}
{
    const v = ratio(row('k', 'oneshot-egress-proxy')?.p50_us, row('k', 'oneshot-nosandbox')?.p50_us);
    target('(k) one-shot exec tool p50 with a `network` table / sandbox off ≤ 3', v, fxx(v), '≤ 3×', v <= 3);
}
{
    const v = f?.p50_ms;
    target('(f) list_tools with 10,000 tools ≤ 10 ms (median of 20)', v, `${fx(v, 1)} ms`, '≤ 10 ms', v <= 10);
}
{
    const v = fSearch?.p50_ms;
    target('(f) tool search over 10,000 tools ≤ 1 ms p50', v, `${fx(v, 2)} ms`, '≤ 1 ms', v <= 1);
}
{
    const v = g ? g.bytes_per_connection / 1024 : NaN;
    target('(g) memory per idle connection ≤ 16 KiB', v, `${fx(v, 1)} KiB`, '≤ 16 KiB', v <= 16);
}
{
    const slowest = hAlone?.slowest_p50_ms;
    const v = ratio(h?.p50_ms, slowest);
    target('(h) start-up to first hello, 3 sources ≤ 1.3 × the slowest source alone (medians of 5)', v,
        `${fx(h?.p50_ms, 1)} / ${fx(slowest, 1)} ms = ${fx(v)}×`, '≤ 1.3×', v <= 1.3);
}
{
    const v = i ? i.rss_kib / 1024 : NaN;
    target('(i) idle RSS with examples/meithd.toml ≤ 16 MiB', v, `${fx(v, 1)} MiB`, '≤ 16 MiB', v <= 16);
}
{
    const v = lCall?.p50_ms;
    target('(l) `meith call echo` from a shell to its printed result ≤ 5 ms p50', v, `${fx(v, 2)} ms`, '≤ 5 ms', v <= 5);
}
{
    const v = lMcp?.p50_ms;
    target('(l) `meith mcp` started to its answer to `initialize` ≤ 20 ms p50', v, `${fx(v, 2)} ms`, '≤ 20 ms', v <= 20);
}
{
    const v = lDaemon?.p50_ms;
    target('(l) meithd with examples/meithd.toml, exec to all tools listed ≤ 500 ms (median of 5)', v, `${fx(v, 1)} ms`, '≤ 500 ms', v <= 500);
}
{
    const v = lMany?.tools_list_p50_ms;
    target('(l) first `tools/list` through `meith mcp` with 10,000 tools ≤ 100 ms p50', v, `${fx(v, 1)} ms`, '≤ 100 ms', v <= 100);
}
{
    const v = mOnDemand?.mcp_list_p50_ms;
    target('(m) meithd\'s start to a first `tools/list` through `meith mcp`, 8 on-demand sources ≤ 50 ms p50', v, `${fx(v, 1)} ms`, '≤ 50 ms', v <= 50);
}
{
    const v = mOnDemand?.processes;
    target('(m) processes at rest with 8 on-demand sources: meithd alone', v, `${v}`, '1', v === 1);
}

// ------------------------------------------------------------------------------------------
// Formatting

function fx(v, d = 2) {
    return Number.isFinite(v) ? v.toFixed(d) : '—';
}
function fxx(v) {
    return Number.isFinite(v) ? `${v.toFixed(2)}×` : '—';
}
function int(v) {
    return Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '—';
}
function us(v) {
    if (!Number.isFinite(v)) return '—';
    return v >= 100 ? Math.round(v).toString() : v.toFixed(1);
}
function table(head, body) {
    const out = [`| ${head.join(' | ')} |`, `| ${head.map((h) => (h.align === 'r' ? '---:' : '---')).join(' | ')} |`];
    for (const r of body) out.push(`| ${r.join(' | ')} |`);
    return out.join('\n');
}
const R = (s) => Object.assign(new String(s), { align: 'r' });

const mainHead = ['scen.', 'server', R('calls/s'), R('min–max'), R('× raw'), R('p50 µs'), R('p50 × raw'), R('p99 µs'),
    R('p99.9 µs'), R('meithd / node'), R('runs')];
const mainBody = [];
for (const [s, srv] of ORDER) {
    const r = row(s, srv);
    if (!r) continue;
    const flags = [];
    if (r.failed) flags.push(`**${r.failed} FAILED**`);
    if (r.disturbed_kept) flags.push(`${r.disturbed_kept} disturbed`);
    const k = (v) => (Number.isFinite(v) ? (v >= 1e5 ? `${Math.round(v / 1000)}k` : (v / 1000).toFixed(1) + 'k') : '—');
    mainBody.push([s, SERVER_NAMES[srv] ?? srv, int(r.calls_per_s), `${k(r.calls_per_s_min)}–${k(r.calls_per_s_max)}`, fx(r.x_raw_calls), us(r.p50_us), fx(r.x_raw_p50),
        us(r.p99_us), us(r.p999_us), fx(r.x_node_calls), `${r.runs}${flags.length ? ' (' + flags.join(', ') + ')' : ''}`]);
}
const mainTable = table(mainHead, mainBody);

const cpuHead = ['scen.', 'server', R('server CPU'), R('children CPU'), R('client CPU'), R('other processes'), R('unattributed'),
    R('server+children CPU µs/call'), R('client CPU µs/call')];
const cpuBody = [];
for (const [s, srv] of ORDER) {
    const r = row(s, srv);
    if (!r) continue;
    cpuBody.push([s, SERVER_NAMES[srv] ?? srv, fx(r.server_cores), fx(r.children_cores), fx(r.client_cores),
        fx(r.other_procs_cores), fx(r.kernel_cores), fx(r.server_cpu_us_per_call), fx(r.client_cpu_us_per_call)]);
}
const cpuTable = table(cpuHead, cpuBody);

const otherHead = ['scen.', 'what', R('result'), 'details'];
const otherBody = [
    ['e', 'kernel floor of the audit trail: appending lines alone', floors.length ? floors.map((fl) => `${fx(fl.cpu_us_per_line)} µs`).join(' / ') + ' per line' : '—',
        floors.length ? `${floors[0].line_bytes}-byte lines (the average tool_call line meithd wrote in (b)) appended with one write(2) per batch of ${floors.map((fl) => fl.batch).join(' / ')} lines, rotating at 64 MiB like meithd, on CPU 1 and the same file system (\`bench/append_floor.cpp\`). With audit off meithd spends ${fx(offCpu)} µs of CPU per call; an audit trail that cost nothing but this append would still leave at most ${floors.map((fl) => fx(ceiling(fl))).join(' / ')} of audit-off throughput on one core` : 'not run'],
    ['e', 'redacted summary of one tool result, by size', summaryCost ? 'see details' : '—',
        summaryCost ? `\`bench/summary_cost\`: \`redactor::append_summary_json\` on \`{"content":[{"type":"text","text":…}]}\`, what the audit writer does for every result, one thread on CPU 1. Prose (spaces and \`key=value\` pairs, so the secret rules must look): ${summaryRow('prose')}. Plain (\`x\` only, nothing for the rules): ${summaryRow('plain')}. A string keeps 256 characters; only those and a 4 KiB margin are redacted, so past ~5 KiB the cost is parsing and copying` : 'not run'],
    ['d', 'the tool host\'s own CPU per call: test host / Node.js SDK / Python SDK', ['meithd+host', 'meithd+node-sdk', 'meithd+python-sdk'].every((x) => row('d', x)) ? ['meithd+host', 'meithd+node-sdk', 'meithd+python-sdk'].map((x) => `${fx(row('d', x).children_cpu_us_per_call, 1)}`).join(' / ') + ' µs' : '—',
        row('d', 'meithd+node-sdk') ? `4 connections × 16 in flight through meithd, as (d), each host answering its arguments (\`tests/hosts/test_host.mjs\` on the SDK's bare \`serve\`; \`bench/sdk_hosts/echo_host.mjs\` with \`runToolHost\`, which checks arguments against the schema; \`bench/sdk_hosts/echo_tools.py\` with \`meith_tools\`): ${['meithd+host', 'meithd+node-sdk', 'meithd+python-sdk'].map((x) => `${SERVER_NAMES[x]} ${int(row('d', x)?.calls_per_s)} calls/s, meithd ${fx(row('d', x)?.own_cpu_us_per_call, 1)} µs a call`).join('; ')}` : 'not run'],
    ['f', 'list_tools round trip, 10,000 registered tools', f ? `${fx(f.p50_ms, 1)} ms` : '—',
        f ? `median of ${f.iterations} (min ${fx(f.min_ms, 1)}, max ${fx(f.max_ms, 1)} ms${f.first_ms !== undefined ? `; the first, unmeasured call after start-up: ${fx(f.first_ms, 1)} ms` : ''}); ${f.tools} descriptors, ${(f.reply_bytes / 1048576).toFixed(2)} MiB reply; CPU per round trip: meithd ${fx((f.server_cpu_s / f.iterations) * 1000, 1)} ms, client ${fx((f.client_cpu_s / f.iterations) * 1000, 1)} ms; daemon RSS ${fx(f.rss_kib / 1024, 1)} MiB with the tools registered` : 'not run'],
    ['f', 'tool search (list_tools with `query`), 10,000 tools', fSearch ? `${fx(fSearch.p50_ms, 2)} ms` : '—',
        fSearch ? `median of ${fSearch.iterations} round trips cycling ${fSearch.queries} queries of 2–5 words over 10,000 DOMAIN_VERB_NOUN tools (\`many_tools_host.mjs --varied\`), BM25 over names, titles, descriptions and parameter names, ${fSearch.tools} results a reply (min ${fx(fSearch.min_ms, 2)}, max ${fx(fSearch.max_ms, 2)} ms; the first, which builds the index: ${fx(fSearch.first_ms, 1)} ms)` : 'not run'],
    ['g', 'RSS per idle connection (10,000 connections)', g ? `${fx(g.bytes_per_connection / 1024, 1)} KiB` : '—',
        g ? `RSS ${fx(g.rss_before_kib / 1024, 1)} → ${fx(g.rss_after_kib / 1024, 1)} MiB with ${g.connections.toLocaleString('en-US')} open (hello answered on each, opened in ${fx(g.open_seconds, 2)} s); ${fx(g.rss_after_close_kib / 1024, 1)} MiB 1 s after closing them` : 'not run'],
    ['h', 'start-up to first connect + hello, 3 sources', h ? `${fx(h.p50_ms, 1)} ms` : '—',
        h ? `median of ${h.iterations}: ${h.samples_ms.map((x) => fx(x, 1)).join(', ')} ms (2 Node.js hosts + 1 exec server; each alone, to ready: ${(hAlone?.sources ?? []).map((x) => `${x.name} ${fx(x.p50_ms, 1)}`).join(', ')} ms; \`node -e ''\` alone: ${fx(nodeStartMs, 1)} ms)` : 'not run'],
    ['k', 'start-up, the (h) sources sandboxed / sandbox off', kOn && kOff ? fx(ratio(kOn.p50_ms, kOff.p50_ms)) + '×' : '—',
        kOn && kOff ? `median of ${kOn.iterations}: ${fx(kOn.p50_ms, 1)} ms sandboxed (hosts start confined to read-only and are started again in their tools' sandbox when they need more), ${fx(kOff.p50_ms, 1)} ms with \`sandbox = "off"\`` : 'not run'],
    ['k', 'streaming download (256 MiB), behind the egress proxy / sandbox off', kDownload ? fx(ratio(kWay('proxy')?.mib_s, kWay('off')?.mib_s)) + '×' : '—',
        kDownload ? `median of ${kDownload.iterations} \`meith call\`s of a one-shot curl tool from an HTTP server on 127.0.0.1 (\`bench/download.mjs\`): ${['off', 'confined', 'proxy'].map((w) => `${w === 'off' ? 'sandbox off' : w === 'confined' ? 'confined, no network table' : 'confined, network table (every byte through meithd\'s proxy)'} ${int(kWay(w)?.mib_s)} MiB/s, meithd CPU ${int(kWay(w)?.meithd_cpu_ms_per_gib)} ms per GiB`).join('; ')}` : 'not run'],
    ['l', '`meith call echo` from a shell, to its printed result', lCall ? `${fx(lCall.p50_ms, 2)} ms` : '—',
        lCall ? `median of ${lCall.iterations} runs of \`meith --socket S call echo '{"s":"hi"}'\` (fork, exec, dynamic loading, connect, hello, call, print, exit; min ${fx(lCall.min_ms, 2)}, max ${fx(lCall.max_ms, 2)} ms), meithd with examples/meithd.toml` : 'not run'],
    ['l', '`meith mcp` ready: started to its answer to `initialize`', lMcp ? `${fx(lMcp.p50_ms, 2)} ms` : '—',
        lMcp ? `median of ${lMcp.iterations} starts, \`initialize\` written at once (min ${fx(lMcp.min_ms, 2)}, max ${fx(lMcp.max_ms, 2)} ms); to the answer of the first \`tools/list\` after it (${lMcp.tools} tools, ${int(lMcp.tools_list_bytes)} bytes): ${fx(lMcp.tools_list_p50_ms, 2)} ms` : 'not run'],
    ['l', 'meithd with examples/meithd.toml: exec to all tools listed', lDaemon ? `${fx(lDaemon.p50_ms, 1)} ms` : '—',
        lDaemon ? `median of ${lDaemon.iterations}: ${lDaemon.samples_ms.map((x) => fx(x, 1)).join(', ')} ms to every one of its ${lDaemon.sources} sources ready (list_sources polled every 1 ms) and \`list_tools\` answered (${lDaemon.tools} tools); first hello answered at ${fx(lDaemon.hello_p50_ms, 1)} ms. PATH=/usr/local/bin:/usr/bin:/bin, as a systemd user manager gives its services` : 'not run'],
    ['l', 'first `tools/list` through `meith mcp --all`, 10,000 tools', lMany ? `${fx(lMany.tools_list_p50_ms, 1)} ms` : '—',
        lMany ? `median of ${lMany.iterations} \`meith mcp --all\` starts against the (f) daemon, from exec to the first page (${lMany.tools} tools, ${int(lMany.tools_list_bytes)} bytes; min ${fx(lMany.tools_list_min_ms, 1)}, max ${fx(lMany.tools_list_max_ms, 1)} ms); \`initialize\` answered at ${fx(lMany.p50_ms, 2)} ms` : 'not run'],
    ...[['eager', mEager], ['on-demand', mOnDemand]].map(([way, r]) => ['m', `8 sources, \`start = "${way}"\`: meithd's exec to a first \`tools/list\` through \`meith mcp\``, r ? `${fx(r.mcp_list_p50_ms, 1)} ms` : '—',
        r ? `median of ${r.iterations} starts (${r.mcp_list_samples_ms.map((x) => fx(x, 1)).join(', ')} ms; ${r.mcp_tools} tools listed); at rest 2 s later: ${r.processes} process${r.processes === 1 ? '' : 'es'}, ${fx(r.rss_kib / 1024, 1)} MiB RSS in all (meithd and every descendant); all ${r.sources} sources settled at ${fx(r.p50_ms, 1)} ms` : 'not run']),
    ['m', 'a `meith call` that starts its idle on-demand source / the same call while it runs', mCold && mWarm ? `${fx(mCold.p50_ms, 1)} / ${fx(mWarm.p50_ms, 2)} ms` : '—',
        mCold && mWarm ? `server-everything's echo, \`idle_stop_ms = 150\`: median of ${mCold.iterations} calls 800 ms apart (each starts it: spawn, sandbox, Node.js start, \`initialize\`, \`tools/list\`, the call; min ${fx(mCold.min_ms, 1)}, max ${fx(mCold.max_ms, 1)} ms), against ${mWarm.iterations} back to back (min ${fx(mWarm.min_ms, 2)} ms)` : 'not run'],
    ['i', 'idle RSS, examples/meithd.toml', i ? `${fx(i.rss_kib / 1024, 1)} MiB` : '—',
        i ? `meithd only, 2 s after ready (anon ${fx(i.rss_anon_kib / 1024, 1)} MiB, peak ${fx(i.hwm_kib / 1024, 1)} MiB); its ${i.children} child processes add ${fx(i.children_rss_kib / 1024, 1)} MiB` : 'not run'],
];
const otherTable = table(otherHead, otherBody);

// (j) tables
const jHead = ['in flight', 'path', R('calls/s'), R('min–max'), R('× direct'), R('p50 µs'), R('p50 × direct'), R('p99 µs'),
    R('p99 × direct'), R('p99.9 µs'), R('runs')];
const jBody = [];
const jCpuBody = [];
for (const depth of J_DEPTHS) {
    for (const [path, name] of J_PATHS) {
        const r = jRows[`${path}-d${depth}`];
        if (!r) continue;
        const flags = [];
        if (r.failed) flags.push(`**${r.failed} FAILED**`);
        if (r.disturbed_kept) flags.push(`${r.disturbed_kept} disturbed`);
        const mine = path.endsWith('meith');
        const pre = path.startsWith('remote-') ? 'remote-' : '';
        const k = (v) => (Number.isFinite(v) ? (v / 1000).toFixed(1) + 'k' : '—');
        jBody.push([depth, name, int(r.calls_per_s), `${k(r.calls_per_s_min)}–${k(r.calls_per_s_max)}`,
            mine ? fx(jRatio(depth, 'calls_per_s', pre)) : '1.00', us(r.p50_us), mine ? fx(jRatio(depth, 'p50_us', pre)) : '1.00',
            us(r.p99_us), mine ? fx(jRatio(depth, 'p99_us', pre)) : '1.00', us(r.p999_us), `${r.runs}${flags.length ? ' (' + flags.join(', ') + ')' : ''}`]);
        jCpuBody.push([depth, `${pre ? 'remote, ' : ''}${mine ? 'through meith' : 'direct'}`, fx(r.us_client, 1), mine ? fx(r.us_bridge, 1) : '—',
            mine ? fx(r.us_meithd, 1) : '—', fx(r.us_server, 1), fx(r.us_chain, 1), fx(r.us_unattributed, 1),
            fx(r.cpu0_cores), fx(r.cpu1_cores),
            (mine ? ['client', 'bridge', 'meithd', 'server'] : ['client', 'server']).map((k) => fx(r.sleeps[k], 1)).join(' / ')]);
    }
}
const jTable = table(jHead, jBody);
const jCpuTable = table(['in flight', 'path', R('client'), R('meith mcp'), R('meithd'), R('MCP server'), R('chain total'),
    R('unattributed'), R('CPU 0 cores'), R('CPU 1 cores'), R('sleeps per call')], jCpuBody);
const jTargetTable = table(['target', R('measured'), R('target'), 'result'],
    T.filter((t) => t.name.startsWith('(j)')).map((t) => [t.name, t.shown, t.target, t.result === 'PASS' ? 'PASS' : t.result === 'MISS' ? '**MISS**' : 'n/a']));
const jRan = Object.keys(jRows).length > 0;

// (e) by load: what the audit trail costs where the tool does nothing (a–c) and beside a tool
// host (d); the audit's CPU per call is the difference of meithd's CPU per call on and off.
const auditHead = ['load', R('audit on calls/s'), R('audit off calls/s'), R('on / off'), R('p50 µs on'), R('p50 µs off'),
    R('meithd CPU µs/call on'), R('off'), R('audit CPU µs/call')];
const auditBody = auditByLoad.map((x) => [`(${x.load}) ${LOAD_SHORT[x.load]}`, int(x.on?.calls_per_s), int(x.off?.calls_per_s),
    x.ratio >= 0.85 ? fx(x.ratio) : `**${fx(x.ratio)}**`, us(x.on?.p50_us), us(x.off?.p50_us),
    fx(x.on?.server_cpu_us_per_call), fx(x.off?.server_cpu_us_per_call), fx(x.audit_us)]);
const auditTable = table(auditHead, auditBody);

const targetTable = table(['target', R('measured'), R('target'), 'result'],
    T.map((t) => [t.name, t.shown, t.target, t.result === 'PASS' ? 'PASS' : t.result === 'MISS' ? '**MISS**' : 'n/a']));

const notes = [];
{
    const own = runs.filter((r) => !r.carried_from);
    const attempts = own.filter((r) => r.status === 'disturbed').length;
    const kept = own.filter((r) => r.status === 'disturbed_kept');
    if (!attempts) notes.push('No run was disturbed (other processes stayed under 0.10 of a core in every window).');
    else {
        notes.push(`${attempts} attempt(s) were disturbed (other processes used more than 0.10 of a core during the window) and repeated, up to ${machine.max_attempts ?? 3} attempts per run.`);
        // Who disturbed (bench/mcp_load.mjs names the busiest other processes of its window).
        const who = new Map();
        for (const r of own.filter((x) => x.status !== 'ok')) {
            const t = r.top_other_procs?.[0];
            if (t && t.cpu_s / r.seconds >= 0.05) {
                const k = `${t.comm} (pid ${t.pid})`;
                who.set(k, Math.max(who.get(k) ?? 0, t.cpu_s / r.seconds));
            }
        }
        if (who.size)
            notes.push(`The busiest other process in the disturbed (j) windows: ${[...who].map(([k, c]) => `${k}, up to ${fx(c)} of a core`).join('; ')}.`);
        if (kept.length)
            notes.push(`${kept.length} run(s) stayed disturbed in every attempt; the least disturbed attempt of each is used and flagged in the table (${kept.map((r) => `${r.scenario}/${r.server} rep ${r.rep}: ${r.other_cores} cores`).join('; ')}).`);
    }
}
if (carried.lines.length) {
    notes.push(`This run was \`bench/run --only ${args.only}\`: scenarios ${[...carried.scenarios].sort().map((x) => `(${x})`).join(', ')} were not re-run; their rows are the runs of ${[...carried.from].join(', ')}, carried over from the raw data of the page this one replaced (tagged \`carried_from\` in the raw data below); the machine and commit above are this run's. Every ratio compares rows of one run: carried rows with carried rows, (${args.only.split(',').join('), (')}) with each other.`);
}
// Hand-written analysis of the missed targets (bench/PROFILE.md), kept next to the numbers.
const profilePath = new URL('./PROFILE.md', import.meta.url);
const profileNotes = fs.existsSync(profilePath) ? fs.readFileSync(profilePath, 'utf8') + '\n' : '';
if (args.notes && fs.existsSync(args.notes)) notes.push(...fs.readFileSync(args.notes, 'utf8').split('\n').filter(Boolean));
for (const fl of failures) notes.push(`FAILED: ${fl}`);

const M = machine;
const machineText = [
    `- CPU: ${M.model}, ${M.cores} cores${M.hypervisor ? ` (virtual machine, ${M.hypervisor})` : ''}; ${M.mem_gib} GiB RAM`,
    `- OS: ${M.os}, kernel ${M.kernel}`,
    `- Tools: ${M.gxx}; Node.js ${M.node}; open file limit ${M.nofile}`,
    `- meithd: ${M.meithd}, commit ${M.git_rev}${M.git_dirty_files ? ` plus ${M.git_dirty_files} uncommitted file(s) outside bench/` : ''}, RelWithDebInfo (\`cmake --preset release\`)`,
    `- Date: ${M.date}; windows of ${M.duration_s} s after ${M.warmup_s} s warm-up, ${M.repeats} repeat(s) per load scenario, medians${M.quick ? ' (**--quick**: not for comparison)' : ''}; whole run ${args.elapsed ?? '?'} s${M.only ? ` (\`--only ${M.only}\`; the other scenarios: see the notes)` : ''}`,
].join('\n');

const stdoutText = [
    `Machine: ${M.model}, ${M.cores} cores, kernel ${M.kernel}, ${M.date}`,
    '',
    mainTable, '', cpuTable, '', auditTable, '', otherTable, '', ...(jRan ? ['(j) MCP through meith', '', jTable, '', jCpuTable, ''] : []),
    targetTable, '', ...notes.map((n) => `- ${n}`), '',
].join('\n');
process.stdout.write(stdoutText);

// ------------------------------------------------------------------------------------------
// latest.json

if (args.json) {
    const strip = (o) => Object.fromEntries(Object.entries(o).map(([key, r]) => [key, { ...r, kept: undefined }]));
    fs.writeFileSync(args.json, JSON.stringify({ machine, load: strip(rows), mcp_through_meith: strip(jRows), append_floor: floors, list_tools: f ?? null, idle_connections: g ?? null,
        startup: h ?? null, node_startup_ms: nodeStartMs, idle_rss: i ?? null, targets: T, notes, runs }, null, 2) + '\n');
}

// ------------------------------------------------------------------------------------------
// docs/benchmarks.md

if (args.doc) {
    const doc = `# Benchmarks

This page is written by \`bench/run\` (issue #5): it builds the release daemon and the
benchmark programs, runs every scenario and rewrites this file with the numbers of that one
run. Do not edit it by hand; run \`bench/run\` again (\`bench/run --quick\` for a smoke test).

## Machine

${machineText}

## Load scenarios

Medians over the runs (*min–max*: the spread of calls/s between them). **× raw** divides by the raw echo server in the same scenario (for (d):
in (b); for (e): in the load it repeats). **meithd / node** divides a meithd row by the node server in the same
scenario (likewise). Payload: one 64-byte string argument.

${Object.entries(LOAD).map(([k, v]) => `- (${k}) ${v}`).join('\n')}

${mainTable}

### Where the CPU went

Median cores used during the measurement window (CPU seconds ÷ window seconds). *server* is
the server process (for MCP: the Node.js server processes), *children* its child processes
(the tool host in (d)), *client* the load generator (\`getrusage\`), *other processes* every
other process and kernel thread on the machine (\`/proc/*/stat\`), *unattributed* the
machine's busy time (\`/proc/stat\`: elapsed × cores − idle − iowait − steal) that no process
accounts for — on this VM mostly the cost of cores going idle and being woken, so it grows
with wake-ups per second. The load generator runs on CPU 0, the server and its children on
CPU 1, so a server or client value near 1.00 means that side was saturated. *CPU µs/call* is
server+children (or client) CPU time divided by the calls completed in the window.

${cpuTable}

### (e) What the audit trail costs, by load

Each audit-on row of (a)–(d) beside the same load with \`[audit] enabled = false\`. *audit
CPU µs/call* is meithd's CPU per call with the audit trail on minus with it off (in (d) the
tool host's CPU is included on both sides and cancels out): building, redacting and
appending one line. Where the tool does nothing (the built-in echo) and meithd's core is
saturated ((b), (c)) that line is a large share of all the work; in one-at-a-time calls (a)
it adds latency but the core is not the limit; beside a tool that does something (d) it is
a small share.

${auditTable}

## Other scenarios

${otherTable}

## (j) MCP through meith

\`tools/call\` of the \`echo\` tool of \`@modelcontextprotocol/server-everything\`
(tests/mcp, pinned by its package-lock) from the official TypeScript SDK's \`Client\` over
\`StdioClientTransport\` (\`bench/mcp_load.mjs\`, one client, *in flight* calls kept
outstanding), two ways in the same run: **direct**, the client spawning the server; **through
meith**, the client spawning \`meith mcp --caller cli\`, which relays to meithd, which calls
the server as an MCP source (\`kind = "mcp"\`, \`prefix = "ev_"\`, \`trust_annotations = true\`,
audit on) — the tool is \`ev_echo\`. The message is 64 bytes, unique per call; every result
is checked (\`"Echo: " + message\`, not \`isError\`). ${M.j_pinned === false ? 'Not pinned (`J_PIN=0`).' : 'Pinning: the client and `meith mcp` (its child) on CPU 0; the direct server, or meithd with the server it supervises, on CPU 1.'} *× direct*
divides the through-meith row by the direct row of the same number in flight (remote rows by
the remote direct row).

**Remote** rows: the same client over the SDK's \`StreamableHTTPClientTransport\` to
\`tests/mcp/http_server.mjs\` (the SDK 1.x Streamable HTTP server, sessions and SSE answers, on
127.0.0.1, CPU 1) directly, beside \`meith mcp\` → meithd → meith-remote (libcurl) → the same
server, a remote source (\`url\`, \`allow_private_network = true\`, audit on); its \`echo\`
returns the text sent. Through meith is *faster* here: the direct row pays the SDK's Node.js
HTTP client on CPU 0 (about 2 ms of CPU a call), which through meith is stdio to \`meith mcp\`
and libcurl in meith-remote. *MCP server* CPU counts the HTTP server and, through meith,
meith-remote with it.

${jRan ? jTable : '(not run)'}

CPU per call in the window, µs (CPU seconds of each process ÷ calls): *client* the SDK client
(Node.js), *meith mcp* the bridge, *meithd*, *MCP server* (server-everything, Node.js);
*unattributed* the machine's busy time none of them or any other process accounts for (see
above); *CPU 0/1 cores* the cores used on each side (client + meith mcp, meithd + server);
*sleeps per call* the voluntary context switches of each process's main thread per call
(client / meith mcp / meithd / server, or client / server): how often each one blocked for
input and had to be woken, about one per message at 1 in flight.

${jRan ? jCpuTable : '(not run)'}

${jRan ? jTargetTable : ''}

## Targets

${targetTable}

${profileNotes}
## Notes from this run

${notes.map((n) => `- ${n}`).join('\n')}

## How it is measured

- **Load generator** (\`bench/loadgen.cpp\`, C++20, POSIX and the standard library only; built
  with \`g++ -O2\`): one thread, one epoll loop over all connections. Each connection keeps
  *depth* calls in flight; a reply frees its slot and the next request goes out in the same
  loop turn, requests for one connection batched into one \`write()\`. Latency is per call,
  from the \`write()\` that carried the request to the \`read()\` that carried its reply
  (\`steady_clock\`). Every reply is checked: \`"type":"tool_result"\`, the \`requestId\` of a
  call in flight on that connection, \`"ok":true\` (MCP: a JSON-RPC \`result\` for an id in
  flight, no \`isError\`). A run with any error counts as failed.
- **Servers** in the same run: **raw echo** (\`bench/raw_echo.cpp\`: one thread, epoll, no
  JSON library; finds the \`requestId\` and the \`arguments\` object by scanning, answers a
  tool_result-shaped line, replies batched per read) — the transport's limit with this
  client; **node server** (\`bench/node_server.mjs\`: \`net\`, \`readline\`, \`JSON.parse\`,
  \`JSON.stringify\`, one write per reply) — what a straightforward implementation reaches;
  **MCP SDK** (\`bench/mcp/\`: \`@modelcontextprotocol/sdk\` pinned in package.json, one
  \`echo\` tool with a zod schema, stdio) — over stdio one connection is one server process,
  so (b) runs 4 server processes (all on CPU 1) and (c), which would need 64 Node.js
  processes, is not run for MCP; **meithd** (\`build/bin/meithd\`, RelWithDebInfo, run from
  a copy taken right after the build, so a concurrent rebuild cannot swap it mid-run) on a
  temporary home with a generated config: audit on is the default audit log
  (\`HOME/audit.jsonl\` on the local disk, \`fsync = "never"\`), audit off is
  \`[audit] enabled = false\` (no line is built, redacted or written); (d) adds a \`[[sources]] kind = "host"\` running
  \`node tests/hosts/test_host.mjs\` and calls its \`t_echo\`.
- **Pinning**: load generator on CPU 0 (\`taskset -c 0\`), server on CPU 1 (\`taskset -c 1\`);
  a server's children (the tool host, Node.js helper threads) share CPU 1 with it.
- **Warm-up and repeats**: each run warms up before its window; the load scenarios run
  repeat by repeat, interleaved (a, b, c, e, d, then again), so slow drift hits every server
  alike; tables show medians.
- **Disturbance**: before every run \`bench/run\` waits (up to ${M.quiet_wait_max_s} s) for the machine to be
  quiet for a second; after it, a run where *other processes* used more than 0.10 of a core
  is repeated (up to ${M.max_attempts} attempts; then the least disturbed one is kept and
  flagged). The same check guards (f) and (h). Every attempt is in the raw data below. The
  check counts other processes rather than \`/proc/stat\` busy time minus ours, because the
  kernel's idle/wake-up overhead (*unattributed*) alone approaches 0.1 of a core in
  wake-up-heavy runs, and the tick-sampled user/system counters of \`/proc/stat\` (this
  kernel: \`TICK_CPU_ACCOUNTING\`, HZ 250, NO_HZ idle) undercount short busy bursts; both
  numbers are in the raw data (\`other_cpu_s\`, \`other_tick_cpu_s\`).
- **(j)** \`bench/mcp_load.mjs\` (Node.js, the SDK from \`tests/mcp/node_modules\`): connect
  (initialize), \`tools/list\` (the tool must be listed), then *in flight* \`callTool\`
  promises, a new one started when one settles; latency from \`callTool()\` to its promise
  settling (\`process.hrtime\`), for calls started and finished inside the window, so it
  includes the SDK's own request/response handling and zod validation on the client side, the
  same on both paths. CPU per process from \`/proc/PID/stat\` at the window's ends (the client:
  \`process.cpuUsage()\`); a new client (and direct server or \`meith mcp\`) per run, while
  meithd and its server-everything stay up across runs like the other daemons.
- **Ping-pong latency across cores** (a) mostly measures how fast this machine wakes a
  sleeping thread on the other core (here a KVM guest, where a cross-core wake-up costs
  tens of µs): compare the servers with each other, not with numbers from other machines.
- **(f)** one connection, 2 unmeasured list_tools then 20 measured round trips (write to
  the last byte of the reply read); the tools come from \`bench/many_tools_host.mjs\`
  (10,000 function schemas with two properties each). **(g)** connections opened in waves of
  256, each answered a \`hello\` before the next wave; RSS (\`VmRSS\`) of meithd 0.5 s after the
  last one, minus its RSS before, divided by 10,000 (config \`[limits] max_connections =
  20000\`). **(h)** time from \`fork\` of meithd to the first successful connect + \`hello\`
  round trip (connect retried every 0.2 ms), with two Node.js tool hosts
  (tests/hosts/test_host.mjs, examples/node-host/host.mjs) and one exec tool in server mode
  (examples/exec-tools/kv_server.mjs); not pinned, median of 5. **(i)** \`VmRSS\` of meithd
  alone, 2 s after it answered its first call, with \`examples/meithd.toml\`; not pinned.

## Raw data

<details>
<summary>Every run of this bench/run, one JSON line each (${lines.length} lines)</summary>

\`status\`: \`ok\`; \`disturbed\` (an attempt not used); \`disturbed_kept\` (every attempt was
disturbed: the least disturbed one again, used and flagged); \`failed\` (errors). CPU fields are seconds in the window: \`other_cpu_s\` is the
machine's busy time minus client, server and children; \`other_procs_cpu_s\` the part of
it used by other processes; \`other_tick_cpu_s\` the same subtraction from the tick-sampled
counters. \`other_cores\` is \`other_procs_cpu_s / seconds\`, the disturbance check.

\`\`\`json
${lines.join('\n')}
\`\`\`

</details>
`;
    fs.writeFileSync(args.doc, doc);
}
