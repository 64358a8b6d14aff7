#!/usr/bin/env node
// bench/node_server.mjs — what a straightforward Node.js implementation of the meith socket
// protocol reaches: net.createServer on the Unix socket, readline for line splitting,
// JSON.parse per frame, JSON.stringify per reply, one socket.write per reply.
// Serves the built-in `echo` (content = arguments), `hello` and `list_tools`.
//
//   node bench/node_server.mjs --socket PATH

import fs from 'node:fs';
import net from 'node:net';
import readline from 'node:readline';

const i = process.argv.indexOf('--socket');
const path = i > 0 ? process.argv[i + 1] : undefined;
if (!path) {
    process.stderr.write('usage: node_server.mjs --socket PATH\n');
    process.exit(2);
}

const echoTool = {
    name: 'echo',
    description: 'Echo the arguments back.',
    inputSchema: { type: 'object', additionalProperties: true },
    capabilities: ['read-only'],
    timeoutMs: null,
    source: 'builtin',
    available: true,
    permission: 'allow',
};

function handle(frame) {
    const requestId = frame.requestId;
    switch (frame.type) {
        case 'tool_call':
            if (frame.toolName !== 'echo') {
                return {
                    type: 'tool_result', protocol: 1, requestId,
                    result: { ok: false, error: { code: 'UNKNOWN_TOOL', message: `unknown tool ${frame.toolName}` } },
                };
            }
            return { type: 'tool_result', protocol: 1, requestId, result: { ok: true, content: frame.arguments } };
        case 'hello':
            return {
                type: 'hello_result', protocol: 1, requestId, sessionId: 's_node', caller: 'plugin',
                server: { name: 'node_server', version: '0.0.0' },
            };
        case 'list_tools':
            return { type: 'tools_list', protocol: 1, requestId, tools: [echoTool] };
        default:
            return { type: 'error', protocol: 1, requestId, code: 'PROTOCOL_ERROR', message: `unknown frame type ${frame.type}` };
    }
}

const server = net.createServer((socket) => {
    const rl = readline.createInterface({ input: socket, crlfDelay: Infinity });
    rl.on('error', () => {});
    rl.on('line', (line) => {
        if (line.length === 0 || socket.destroyed) return;
        let reply;
        try {
            reply = handle(JSON.parse(line));
        } catch (e) {
            reply = { type: 'error', protocol: 1, code: 'PROTOCOL_ERROR', message: String(e.message) };
        }
        socket.write(JSON.stringify(reply) + '\n');
    });
    socket.on('error', () => {});
});

try { fs.unlinkSync(path); } catch {}
server.listen(path);
const stop = () => server.close(() => process.exit(0)) && setTimeout(() => process.exit(0), 200);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
