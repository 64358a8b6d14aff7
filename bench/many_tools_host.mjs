#!/usr/bin/env node
// bench/many_tools_host.mjs — a tool host (docs/protocol.md §7) that registers many tools,
// for the list_tools scenario of bench/run. Standard library only.
//
//   node bench/many_tools_host.mjs [--count=10000]
//
// Tool i is `bench_tool_<i>` with a small but realistic schema (two properties, one
// required) and the `read-only` capability; calling any of them returns its arguments.

import readline from 'node:readline';

let count = 10000;
for (const arg of process.argv.slice(2)) {
    const m = /^--count=(\d+)$/.exec(arg);
    if (m) count = Number(m[1]);
    else {
        process.stderr.write(`many_tools_host: unknown argument ${arg}\n`);
        process.exit(64);
    }
}

const width = String(count).length;
const schemas = [];
for (let i = 1; i <= count; i++) {
    const name = `bench_tool_${String(i).padStart(width, '0')}`;
    schemas.push({
        type: 'function',
        function: {
            name,
            description: `Benchmark tool ${i} of ${count}: returns its arguments unchanged.`,
            parameters: {
                type: 'object',
                properties: {
                    path: { type: 'string', description: 'A path, relative to the root.' },
                    limit: { type: 'integer', minimum: 1, description: 'At most this many items.' },
                },
                required: ['path'],
            },
        },
        capabilities: ['read-only'],
    });
}

const write = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
    if (!line) return;
    let req;
    try {
        req = JSON.parse(line);
    } catch {
        return;
    }
    const state = req.params?.state ?? {};
    switch (req.method) {
        case 'init':
            write({ v: 1, id: req.id, ok: true, result: { value: { tools: count }, state: {} } });
            break;
        case 'get_tool_schemas':
            write({ v: 1, id: req.id, ok: true, result: { value: schemas, state } });
            break;
        case 'execute_tool':
            write({ v: 1, id: req.id, ok: true, result: { value: { success: true, result: req.params.arguments ?? {} }, state } });
            break;
        default:
            write({ v: 1, id: req.id, ok: false, error: { type: 'UnknownMethod', detail: String(req.method), stack: '' } });
    }
});
rl.on('close', () => process.exit(0));
