// read_latency.mjs: resources/read p50/p99 through `meith mcp` against the same 1.x SDK client
// talking to server-everything directly (issue 29's note; not yet a bench/run row).
//   node read_latency.mjs MEITH HOME SERVER_JS [N]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [meith, home, serverJs, n = '300'] = process.argv.slice(2);
async function measure(command, args) {
    const client = new Client({ name: 'latency', version: '1' });
    await client.connect(new StdioClientTransport({ command, args, stderr: 'ignore',
        env: { ...process.env, MEITH_NO_AUTOSTART: '1' } }));
    const uri = 'demo://resource/static/document/instructions.md';
    for (let i = 0; i < 30; i++) await client.readResource({ uri });
    const times = [];
    for (let i = 0; i < Number(n); i++) {
        const t = process.hrtime.bigint();
        await client.readResource({ uri });
        times.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    await client.close();
    times.sort((a, b) => a - b);
    return { p50_us: Math.round(times[times.length >> 1]), p99_us: Math.round(times[Math.floor(times.length * 0.99)]) };
}
console.log(JSON.stringify({ direct: await measure(process.execPath, [serverJs, 'stdio']),
                             meith: await measure(meith, ['mcp', '--home', home]) }));
