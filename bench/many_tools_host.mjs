#!/usr/bin/env node
// bench/many_tools_host.mjs — a tool host (docs/protocol.md §7) that registers many tools,
// for the list_tools scenario of bench/run. Standard library only.
//
//   node bench/many_tools_host.mjs [--count=10000] [--varied]
//
// Tool i is `bench_tool_<i>` with a small but realistic schema (two properties, one
// required) and the `read-only` capability; calling any of them returns its arguments.
// --varied (for tool search, docs/protocol.md §20): tool i is DOMAIN_VERB_NOUN instead, one of
// 20 × 20 × 25 = 10,000 combinations (e.g. `calendar_create_event`, "Creates an event in
// calendar."), with a `<noun>_id` parameter: a registry as varied as many servers' tools.

import readline from 'node:readline';

let count = 10000;
let varied = false;
for (const arg of process.argv.slice(2)) {
    const m = /^--count=(\d+)$/.exec(arg);
    if (m) count = Number(m[1]);
    else if (arg === '--varied') varied = true;
    else {
        process.stderr.write(`many_tools_host: unknown argument ${arg}\n`);
        process.exit(64);
    }
}

const DOMAINS = ['calendar', 'billing', 'helpdesk', 'github', 'gitlab', 'jira', 'slack', 'email',
    'drive', 'photos', 'crm', 'shop', 'payments', 'todo', 'notes', 'music', 'grafana', 'pager',
    'vault', 'storage'];
const VERBS = ['get', 'list', 'create', 'update', 'delete', 'search', 'archive', 'export', 'import',
    'sync', 'share', 'lock', 'tag', 'count', 'copy', 'merge', 'validate', 'publish', 'schedule',
    'summarize'];
const NOUNS = ['event', 'invoice', 'ticket', 'user', 'repository', 'branch', 'issue', 'comment',
    'message', 'channel', 'document', 'folder', 'image', 'report', 'contact', 'order', 'payment',
    'task', 'note', 'playlist', 'dashboard', 'alert', 'secret', 'backup', 'table'];
/// "create" → "Creates", "search" → "Searches", "copy" → "Copies".
const third = (v) => (v.endsWith('y') ? v.slice(0, -1) + 'ies' : /(s|sh|ch|x)$/.test(v) ? v + 'es' : v + 's');
const variedTool = (i) => {
    const domain = DOMAINS[i % 20], verb = VERBS[Math.floor(i / 20) % 20];
    const noun = NOUNS[Math.floor(i / 400) % 25];
    const v = third(verb);
    return {
        type: 'function',
        function: {
            name: `${domain}_${verb}_${noun}`,
            description: `${v[0].toUpperCase()}${v.slice(1)} ${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun} in ${domain}.`,
            parameters: {
                type: 'object',
                properties: {
                    [`${noun}_id`]: { type: 'string', description: `The ${noun}'s id in ${domain}.` },
                    limit: { type: 'integer', minimum: 1, description: 'At most this many items.' },
                },
                required: [`${noun}_id`],
            },
        },
        capabilities: ['read-only'],
    };
};

const width = String(count).length;
const schemas = [];
for (let i = 1; i <= count && varied; i++) schemas.push(variedTool(i - 1));
for (let i = 1; i <= count && !varied; i++) {
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
