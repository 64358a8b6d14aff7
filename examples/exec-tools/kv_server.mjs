#!/usr/bin/env node
// An example server-mode exec tool: an in-memory key-value store. Its state lives only in this
// process, so it is lost when meithd restarts the tool or stops.
//
//   [[sources]]
//   name = "kv"
//   kind = "exec"
//   mode = "server"
//   command = ["node", "exec-tools/kv_server.mjs"]
//   tool.name = "kv"
//
// meithd starts it once and speaks JSON-RPC 2.0 over stdin/stdout, one object per line:
//   → {"jsonrpc":"2.0","id":7,"method":"execute","params":{"args":{"op":"set","key":"a","value":1}}}
//   ← {"jsonrpc":"2.0","id":7,"result":{"key":"a","value":1,"previous":null}}
// Answers are matched by id, so they may come in any order (here they are immediate). Errors:
//   ← {"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"unknown op \"pop\"","data":{...}}}
// The process exits when stdin is closed. Logs go to stderr.
//
// Arguments: {"op":"get"|"set"|"delete"|"list", "key"?: string, "value"?: any}
//   get    {key}         → {"key","found":bool,"value":any|null}
//   set    {key, value}  → {"key","value","previous":any|null}
//   delete {key}         → {"key","deleted":bool}
//   list   {}            → {"keys":[...sorted], "count":N}

import readline from 'node:readline';

const INVALID_PARAMS = -32602;
const METHOD_NOT_FOUND = -32601;

const store = new Map();

class RpcError extends Error {
    constructor(code, message, data) {
        super(message);
        this.code = code;
        this.data = data;
    }
}

function needKey(args) {
    if (typeof args.key !== 'string' || args.key === '') {
        throw new RpcError(INVALID_PARAMS, `op "${args.op}" needs a non-empty string "key"`);
    }
    return args.key;
}

function execute(args) {
    switch (args.op) {
        case 'get': {
            const key = needKey(args);
            return { key, found: store.has(key), value: store.has(key) ? store.get(key) : null };
        }
        case 'set': {
            const key = needKey(args);
            if (!('value' in args)) throw new RpcError(INVALID_PARAMS, 'op "set" needs a "value"');
            const previous = store.has(key) ? store.get(key) : null;
            store.set(key, args.value);
            return { key, value: args.value, previous };
        }
        case 'delete': {
            const key = needKey(args);
            return { key, deleted: store.delete(key) };
        }
        case 'list': {
            const keys = [...store.keys()].sort();
            return { keys, count: keys.length };
        }
        default:
            throw new RpcError(INVALID_PARAMS, `unknown op ${JSON.stringify(args.op)}`, {
                ops: ['get', 'set', 'delete', 'list'],
            });
    }
}

function send(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function handle(line) {
    let msg;
    try {
        msg = JSON.parse(line);
    } catch {
        console.error(`kv: ignoring a line that is not JSON (${line.length} bytes)`);
        return;
    }
    if (msg === null || typeof msg !== 'object' || !('id' in msg)) return; // notifications
    const { id } = msg;
    try {
        if (msg.method !== 'execute') {
            throw new RpcError(METHOD_NOT_FOUND, `unknown method ${JSON.stringify(msg.method)}`);
        }
        const args = msg.params?.args;
        if (args === null || typeof args !== 'object' || Array.isArray(args)) {
            throw new RpcError(INVALID_PARAMS, 'params.args must be an object');
        }
        send({ jsonrpc: '2.0', id, result: execute(args) });
    } catch (e) {
        if (!(e instanceof RpcError)) console.error(`kv: ${e.stack}`);
        const error = { code: e.code ?? -32603, message: e.message };
        if (e.data !== undefined) error.data = e.data;
        send({ jsonrpc: '2.0', id, error });
    }
}

readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
    .on('line', (line) => {
        if (line.trim() !== '') handle(line);
    })
    .on('close', () => process.exit(0));
