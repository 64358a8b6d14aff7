#!/usr/bin/env node
// bench/imported_servers.mjs — what `meith import` changes for six popular MCP servers (issue 43):
// each server's start-up time (spawn to its tools/list answer) and resident memory (VmRSS of its
// process tree at that moment), run three ways:
//   npx      as the client config says: `npx -y PACKAGE@VERSION ARGS` (npm's cache warm)
//   pinned   what import writes: node and the package's bin from meith's server store
//   meith    the imported source under meithd, confined: meithd's own "ready in" for a config
//            of that one source (its second start: the sandbox memory warm), RSS from its pid
//
//   node bench/imported_servers.mjs BUILD_BIN_DIR [RUNS]     (default 3 runs; prints JSON lines
//                                                            and a Markdown table)
// Versions are tests/mcp's pinned ones. Not timed in CI: a measurement, not a test.
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, writeFileSync, readFileSync, readdirSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const [bin, runsArg] = process.argv.slice(2);
if (!bin) { console.error('usage: node bench/imported_servers.mjs BUILD_BIN_DIR [RUNS]'); process.exit(2); }
const runs = Number(runsArg ?? 3);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const version = (p) => JSON.parse(readFileSync(join(root, 'tests/mcp/node_modules', p, 'package.json'))).version;
const work = mkdtempSync(join(tmpdir(), 'meith-bench-import-'));
const keys = mkdtempSync(join(tmpdir(), 'meith-bench-keys-'));
mkdirSync(join(work, 'files'));
const env = { ...process.env, XDG_DATA_HOME: join(work, 'data'), XDG_STATE_HOME: join(work, 'state'),
    MEITH_SECRETS_KEY: join(keys, 'secrets.key'), MEITH_SECRET_SERVICE: 'off', MEITH_NO_AUTOSTART: '1' };
delete env.XDG_RUNTIME_DIR;

const servers = {
    memory: ['-y', `@modelcontextprotocol/server-memory@${version('@modelcontextprotocol/server-memory')}`],
    everything: ['-y', `@modelcontextprotocol/server-everything@${version('@modelcontextprotocol/server-everything')}`, 'stdio'],
    filesystem: ['-y', `@modelcontextprotocol/server-filesystem@${version('@modelcontextprotocol/server-filesystem')}`, join(work, 'files')],
    thinking: ['-y', `@modelcontextprotocol/server-sequential-thinking@${version('@modelcontextprotocol/server-sequential-thinking')}`],
    postgres: ['-y', `@modelcontextprotocol/server-postgres@${version('@modelcontextprotocol/server-postgres')}`, 'postgresql://app:pw@127.0.0.1:1/app'],
    playwright: [`@playwright/mcp@${version('@playwright/mcp')}`, '--headless', '--executable-path', '/usr/bin/chromium'],
};
const mcpJson = join(work, '.mcp.json');
writeFileSync(mcpJson, JSON.stringify({ mcpServers: Object.fromEntries(
    Object.entries(servers).map(([n, args]) => [n, { command: 'npx', args }])) }, null, 2));
const home = join(work, 'home');
mkdirSync(home);
execFileSync(join(bin, 'meith'), ['import', mcpJson, '--yes', '--home', home], { env, stdio: 'ignore' });
const imported = readFileSync(join(home, 'meithd.toml'), 'utf8');

/// The resident memory of pid and every descendant, KiB.
function treeRss(pid) {
    const parent = new Map();
    for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
        try {
            const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
            parent.set(Number(p), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
        } catch { /* gone */ }
    }
    const tree = new Set([pid]);
    for (let grew = true; grew;) {
        grew = false;
        for (const [p, pp] of parent) if (tree.has(pp) && !tree.has(p)) { tree.add(p); grew = true; }
    }
    let kib = 0;
    for (const p of tree) {
        try { kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0); } catch { /* gone */ }
    }
    return kib;
}

/// Spawns cmd, sends initialize, initialized and tools/list; ms to the tools/list answer, and
/// the tree's RSS then.
function directStart(cmd) {
    return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        const child = spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], env, cwd: work, detached: true });
        let err = '';
        child.stderr.on('data', (d) => { err = (err + d).slice(-2000); });
        const kill = () => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } };
        const timer = setTimeout(() => { kill(); reject(new Error(`${cmd.join(' ')}: no answer in 60 s\n${err}`)); }, 60000);
        child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${cmd.join(' ')}: exited ${code}\n${err}`)); });
        let buf = '';
        child.stdout.on('data', (d) => {
            buf += d;
            for (let nl; (nl = buf.indexOf('\n')) >= 0;) {
                const line = buf.slice(0, nl); buf = buf.slice(nl + 1);
                let msg; try { msg = JSON.parse(line); } catch { continue; }
                if (msg.id === 1) {
                    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
                    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }) + '\n');
                } else if (msg.id === 2) {
                    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
                    const kib = treeRss(child.pid);
                    clearTimeout(timer);
                    child.removeAllListeners('exit');
                    kill();
                    resolve({ ms, kib });
                }
            }
        });
        child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
            protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }) + '\n');
    });
}

/// meithd with a config of the one imported source: its "ready in" and the source's tree RSS.
async function meithStart(name) {
    const entryStart = imported.indexOf(`[[sources]]\nname = "${name}"`);
    const rest = imported.slice(entryStart + 1);
    const next = rest.search(/\n# Imported by|\n\[\[/);
    const h = join(work, `h-${name}`);
    mkdirSync(h, { recursive: true });
    writeFileSync(join(h, 'meithd.toml'), imported.slice(entryStart, next < 0 ? undefined : entryStart + 1 + next) + '\n');
    // The secrets import kept (postgres' URL) live in the home's sealed store.
    try { copyFileSync(join(home, 'secrets.enc'), join(h, 'secrets.enc')); } catch { /* none */ }
    const once = () => new Promise((resolve, reject) => {
        const d = spawn(join(bin, 'meithd'), ['--home', h], { env, stdio: ['ignore', 'ignore', 'pipe'] });
        let log = '';
        d.stderr.on('data', (c) => {
            log += c;
            const m = /ready in ([\d.]+) ms/.exec(log);
            if (!m) return;
            d.stderr.removeAllListeners('data');
            const src = JSON.parse(execFileSync(join(bin, 'meith'), ['sources', '--json', '--home', h], { env })).find((s) => s.name === name);
            const kib = src?.pid ? treeRss(src.pid) : 0;
            d.kill('SIGTERM');
            d.on('exit', () => resolve({ ms: Number(m[1]), kib, state: src?.state }));
        });
        setTimeout(() => { d.kill('SIGKILL'); reject(new Error(`meithd with ${name}: not ready in 60 s\n${log}`)); }, 60000);
    });
    await once(); // the first start learns the sandbox (sandbox-memory.json)
    const out = [];
    for (let i = 0; i < runs; i++) out.push(await once());
    return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const [name, args] of Object.entries(servers)) {
    // Run directly, a ${secret:…} argument is the value it stands for (here: the URL).
    const pinnedCmd = JSON.parse(/command = (\[.*\])/.exec(imported.slice(imported.indexOf(`name = "${name}"`)))[1])
        .map((a) => (a.startsWith('${secret:') ? args.at(-1) : a));
    const samples = { npx: [], pinned: [] };
    // Without a terminal, npm 11's npx cancels a package it must fetch unless told -y.
    const npx = ['npx', ...(args[0] === '-y' ? [] : ['-y']), ...args];
    await directStart(npx); // npm's cache warm
    for (let i = 0; i < runs; i++) {
        samples.npx.push(await directStart(npx));
        samples.pinned.push(await directStart(pinnedCmd));
    }
    samples.meith = await meithStart(name);
    const row = { name };
    for (const k of ['npx', 'pinned', 'meith']) {
        row[`${k}_ms`] = Math.round(median(samples[k].map((s) => s.ms)));
        row[`${k}_mib`] = Math.round(median(samples[k].map((s) => s.kib)) / 1024);
    }
    console.log(JSON.stringify(row));
    rows.push(row);
}
console.log('\n| server | npx start | npx RSS | pinned start | pinned RSS | through meith (confined) start | RSS |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows)
    console.log(`| ${r.name} | ${r.npx_ms} ms | ${r.npx_mib} MiB | ${r.pinned_ms} ms | ${r.pinned_mib} MiB | ${r.meith_ms} ms | ${r.meith_mib} MiB |`);
rmSync(work, { recursive: true, force: true });
rmSync(keys, { recursive: true, force: true });
