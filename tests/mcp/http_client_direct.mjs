#!/usr/bin/env node
// http_client_direct.mjs: the official SDK's own Streamable HTTP client calling tool `echo` on an
// MCP server at URL directly (no meith, no auth): the baseline a benchmark compares meith's
// remote (HTTP) MCP source against. Meant for tests/mcp/http_server.mjs, whose echo returns
// the text it was given; every answer is checked.
//
//   node http_client_direct.mjs --url=URL [--calls=N] [--inflight=K] [--sdk=1|2]
//                               [--negotiate=legacy|auto|2026-07-28] [--warmup=W]
//
//   --url=URL       the MCP endpoint, e.g. http://127.0.0.1:PORT/mcp
//   --calls=N       calls measured (default 1000)
//   --inflight=K    calls in flight at once (default 1)
//   --sdk=1         @modelcontextprotocol/sdk 1.x Client + StreamableHTTPClientTransport (default;
//                   initialize handshake, 2025-11-25, Mcp-Session-Id when the server gives one)
//   --sdk=2         @modelcontextprotocol/client 2.x Client + StreamableHTTPClientTransport
//   --negotiate=M   2.x only: versionNegotiation mode: `auto` (default: a server/discover probe,
//                   2026-07-28 when the server speaks it, else initialize), `legacy`
//                   (initialize only), or a revision to pin (2026-07-28)
//   --warmup=W      calls made first and not measured (default 0)
//
// Prints one JSON line: {"calls":N,"p50_us":..,"p99_us":..,"calls_per_s":..}; the protocol
// version it settled on goes to stderr. Exit status 1 when any call failed or answered wrong.
const flags = new Map();
for (const a of process.argv.slice(2)) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (!m) die(`unknown argument ${a}`);
    flags.set(m[1], m[2] ?? true);
}
for (const k of flags.keys())
    if (!['url', 'calls', 'inflight', 'sdk', 'negotiate', 'warmup'].includes(k)) die(`unknown option --${k}`);
const url = flags.get('url');
const calls = Number(flags.get('calls') ?? 1000);
const inflight = Number(flags.get('inflight') ?? 1);
const warmup = Number(flags.get('warmup') ?? 0);
const sdk = String(flags.get('sdk') ?? '1');
const negotiate = String(flags.get('negotiate') ?? 'auto');
if (typeof url !== 'string' || !(calls >= 1) || !(inflight >= 1) || !(warmup >= 0) || !['1', '2'].includes(sdk))
    die('usage: --url=URL --calls=N --inflight=K [--sdk=1|2] [--negotiate=legacy|auto|REVISION] [--warmup=W]');

function die(msg) {
    process.stderr.write(`http_client_direct: ${msg}\n`);
    process.exit(2);
}

async function connect() {
    if (sdk === '1') {
        const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
        const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
        const c = new Client({ name: 'http-client-direct', version: '1.0.0' });
        await c.connect(new StreamableHTTPClientTransport(new URL(url)));
        return c;
    }
    const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
    const mode = negotiate === 'legacy' || negotiate === 'auto' ? negotiate : { pin: negotiate };
    const c = new Client({ name: 'http-client-direct', version: '1.0.0' }, { versionNegotiation: { mode } });
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
    return c;
}
const client = await connect().catch((e) => {
    process.stderr.write(`http_client_direct: connect failed: ${e?.message ?? e}\n`);
    process.exit(1);
});
process.stderr.write(`http_client_direct: sdk=${sdk} protocol=${client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? '?'}\n`);

let failures = 0;
async function call(i) {
    const text = `m${i}-${'x'.repeat(32)}`;
    const r = await client.callTool({ name: 'echo', arguments: { text } });
    if (r.isError || r.content?.[0]?.text !== text) {
        if (failures++ < 3) process.stderr.write(`http_client_direct: wrong answer ${JSON.stringify(r)}\n`);
    }
}
async function run(n, times) {
    let next = 0;
    const worker = async () => {
        while (next < n) {
            const i = next++;
            const t = process.hrtime.bigint();
            try {
                await call(i);
            } catch (e) {
                if (failures++ < 3) process.stderr.write(`http_client_direct: call failed: ${e?.message ?? e}\n`);
            }
            times?.push(Number(process.hrtime.bigint() - t) / 1000);
        }
    };
    await Promise.all(Array.from({ length: Math.min(inflight, n) }, worker));
}

if (warmup > 0) await run(warmup);
const times = [];
const t0 = process.hrtime.bigint();
await run(calls, times);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
await client.close().catch(() => {});
times.sort((a, b) => a - b);
const at = (p) => Math.round(times[Math.min(times.length - 1, Math.floor(times.length * p))]);
console.log(JSON.stringify({ calls, p50_us: at(0.5), p99_us: at(0.99), calls_per_s: Math.round((calls / seconds) * 10) / 10 }));
process.exit(failures ? 1 : 0);
