// meith/client: a promise client of meithd's socket protocol (docs/protocol.md §2-§4, §13).
//
// One connection; replies are matched to requests by requestId. A call's events come as an
// async iterator with a bounded buffer: while the consumer is behind, the socket is paused, so
// the daemon applies back-pressure instead of memory growing. An AbortSignal cancels a call
// (cancel_tool_call). A lost connection fails what is in flight with ConnectionLost; the next
// request connects again, discovery included. Standard library only.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Events buffered per call before the socket is paused. */
export const EVENT_BUFFER = 256;

export class NotRunning extends Error { constructor(m) { super(m); this.name = 'NotRunning'; } }
export class ConnectionLost extends Error { constructor(m) { super(m); this.name = 'ConnectionLost'; } }
/** An error frame (or an unreadable frame); `code` is PROTOCOL_ERROR for a malformed frame, else
 * the refusal's (docs/protocol.md §3: FRAME_TOO_LARGE, NOT_ALLOWED, NO_SUCH_SOURCE, ...). */
export class ProtocolError extends Error {
    constructor(m, code = 'PROTOCOL_ERROR') { super(m); this.name = 'ProtocolError'; this.code = code; }
}

/** An ok:false result; `code`, `details` and the whole `result`. */
export class ToolCallError extends Error {
    constructor(code, message, details, result) {
        super(message);
        this.name = 'ToolCallError';
        this.code = code;
        this.details = details;
        this.result = result;
    }
}
const codes = ['UNKNOWN_TOOL', 'VALIDATION_ERROR', 'PERMISSION_DENIED', 'TIMEOUT', 'CANCELLED',
    'TOOL_FAILED', 'RUNTIME_SHUTTING_DOWN', 'PROTOCOL_ERROR', 'RATE_LIMITED'];
/** One subclass per error code: UnknownTool, ValidationError, PermissionDenied, ... */
export const errors = Object.fromEntries(codes.map((code) => {
    const name = code.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase());
    const cls = { [name]: class extends ToolCallError {
        constructor(message, details, result) { super(code, message, details, result); this.name = name; }
    } }[name];
    return [name, cls];
}));
const byCode = Object.fromEntries(codes.map((c, i) => [c, Object.values(errors)[i]]));

/** Throws the ToolCallError subclass of an ok:false result; returns it otherwise. */
export function checkResult(result) {
    if (result.ok) return result;
    const err = result.error ?? {};
    const cls = byCode[err.code] ?? errors.ToolFailed;
    throw new cls(err.message ?? 'the tool failed', err.details, result);
}

/**
 * Where meithd listens: socketPath in HOME/config.json, else $XDG_RUNTIME_DIR/meith/meithd.sock,
 * else HOME/meithd.sock. HOME: `home` > $MEITH_HOME > ~/.meith (docs/protocol.md §1).
 */
export function locateSocket(home) {
    const base = home ?? process.env.MEITH_HOME ?? path.join(os.homedir(), '.meith');
    try {
        const record = JSON.parse(fs.readFileSync(path.join(base, 'config.json'), 'utf8'));
        if (typeof record?.socketPath === 'string' && record.socketPath !== '') {
            return path.resolve(base, record.socketPath);
        }
    } catch { /* no record yet */ }
    const runtime = process.env.XDG_RUNTIME_DIR;
    return runtime ? path.join(runtime, 'meith', 'meithd.sock') : path.join(base, 'meithd.sock');
}

/** A JSON-RPC error an MCP request got (docs/protocol.md §17): `code`, `data`. */
export class McpError extends Error {
    constructor(code, message, data) { super(message); this.name = 'McpError'; this.code = code; this.data = data; }
}

/** The ClientCapabilities member each server request needs (docs/protocol.md §17). */
const CAPABILITY_OF = {
    'sampling/createMessage': ['sampling', {}],
    'elicitation/create': ['elicitation', { form: {}, url: {} }],
    'roots/list': ['roots', {}],
};

export class Client {
    constructor({ home, socket, caller = 'plugin', name = 'meith-node', agent, handlers = {} } = {}) {
        for (const m of Object.keys(handlers))
            if (!CAPABILITY_OF[m]) throw new TypeError(`no such server request: ${m}; one of ${Object.keys(CAPABILITY_OF).join(', ')}`);
        this.handlers = handlers;
        this.home = home;
        this.socket = socket;
        this.caller = caller;
        this.name = name;
        this.agent = agent;
        this.hello = null;
        this._conn = null;
        this._connecting = null;
        this._pending = new Map();
        this._n = 0;
        this._prefix = `node${process.pid}_${Math.random().toString(36).slice(2, 8)}_`;
    }

    _id() { return this._prefix + (++this._n); }

    /** Connects (if not connected) and says hello. */
    async connect() {
        if (this._conn && !this._conn.destroyed) return this;
        if (!this._connecting) this._connecting = this._open().finally(() => { this._connecting = null; });
        await this._connecting;
        return this;
    }

    async _open() {
        const where = this.socket ?? locateSocket(this.home);
        const conn = await new Promise((resolve, reject) => {
            const s = net.createConnection(where);
            s.once('connect', () => { s.removeAllListeners('error'); resolve(s); });
            s.once('error', (e) => reject(['ENOENT', 'ECONNREFUSED'].includes(e.code)
                ? new NotRunning(`meithd is not running (no daemon at ${where})`) : e));
        });
        this._conn = conn;
        let buffered = '';
        conn.setEncoding('utf8');
        conn.on('data', (chunk) => {
            buffered += chunk;
            let nl;
            while ((nl = buffered.indexOf('\n')) >= 0) {
                const line = buffered.slice(0, nl);
                buffered = buffered.slice(nl + 1);
                if (line.trim() !== '') this._dispatch(line, conn);
            }
        });
        const lost = () => {
            if (this._conn === conn) this._conn = null;
            // Only the requests sent on this connection (a newer one may be up already).
            for (const p of [...this._pending.values()]) {
                if (p.conn === conn) p.fail(new ConnectionLost('connection to meithd closed'));
            }
        };
        conn.on('close', lost);
        conn.on('error', () => conn.destroy());
        const info = { name: this.name, caller: this.caller };
        if (this.agent) info.agent = this.agent;
        const hello = { type: 'hello', clientInfo: info };
        const methods = Object.keys(this.handlers);
        if (methods.length) hello.capabilities = Object.fromEntries(methods.map((m) => CAPABILITY_OF[m]));
        this.hello = await this._request(hello, 'hello_result', true);
    }

    _dispatch(line, conn) {
        let frame;
        try { frame = JSON.parse(line); } catch { return; }
        const p = typeof frame?.requestId === 'string' ? this._pending.get(frame.requestId) : undefined;
        if (frame?.type === 'client_request') {
            this._answerClientRequest(frame);
            return;
        }
        if (frame?.type === 'error') {
            p?.fail(new ProtocolError(frame.message ?? 'protocol error', frame.code ?? 'PROTOCOL_ERROR'));
            return;
        }
        if (!p) return;
        if (frame.type === 'tool_event') p.event?.(frame.event, conn);
        else if (frame.type === p.kind) p.done(frame);
    }

    /** A server's request during one of our calls: the handler's result, or its error. */
    async _answerClientRequest(frame) {
        const reply = { type: 'client_response', clientRequestId: frame.clientRequestId };
        try {
            const handler = this.handlers[frame.method];
            if (!handler) throw new McpError(-32601, `no handler for ${frame.method}`);
            reply.result = await handler(frame.params ?? {});
        } catch (e) {
            reply.error = { code: e instanceof McpError ? e.code : -32603, message: String(e?.message ?? e) };
        }
        try { this._send(reply); } catch { /* the connection is gone: the call ends with it */ }
    }

    /**
     * An MCP request meithd answers from its MCP sources (docs/protocol.md §17): resources/list,
     * resources/read, prompts/get, completion/complete, ... Resolves to the MCP result; rejects
     * with McpError for a JSON-RPC error.
     */
    async mcpRequest(method, params = {}) {
        const r = await this._request({ type: 'mcp_request', method, params }, 'mcp_result');
        if (r.error) throw new McpError(r.error.code ?? -32603, r.error.message ?? 'error', r.error.data);
        return r.result;
    }

    _send(frame) {
        if (!this._conn || this._conn.destroyed) throw new ConnectionLost('connection to meithd closed');
        this._conn.write(JSON.stringify({ protocol: 1, ...frame }) + '\n');
    }

    async _request(frame, kind, connected = false) {
        if (!connected) await this.connect();
        const id = this._id();
        return new Promise((resolve, reject) => {
            this._pending.set(id, {
                kind,
                conn: this._conn,
                done: (f) => { this._pending.delete(id); resolve(f); },
                fail: (e) => { this._pending.delete(id); reject(e); },
            });
            try { this._send({ ...frame, requestId: id }); } catch (e) { this._pending.delete(id); reject(e); }
        });
    }

    /** The tools: ToolDescriptors, or a provider's `format` (openai, openai.responses, anthropic, mcp). */
    async listTools({ format, tags, models } = {}) {
        const frame = { type: 'list_tools' };
        if (format && format !== 'meith') frame.format = format;
        if (tags) frame.tags = tags;
        if (models) frame.models = models;
        return (await this._request(frame, 'tools_list')).tools;
    }

    async listSources() {
        return (await this._request({ type: 'list_sources' }, 'sources_list')).sources;
    }

    /** {text, permission}: what a call would do, without running it. */
    async preview(tool, args) {
        const frame = { type: 'preview_tool_call', toolName: tool };
        if (args !== undefined) frame.arguments = args;
        const r = await this._request(frame, 'tool_preview');
        return { text: r.text, permission: r.permission };
    }

    /**
     * Calls `tool`; resolves to its ToolResult (`events` added). An ok:false result rejects with
     * the ToolCallError subclass of its code unless `check: false`. `signal` cancels the call.
     */
    async call(tool, args = {}, options = {}) {
        const stream = this.stream(tool, args, options);
        for await (const _ of stream) { /* collected in stream.events */ }
        return options.check === false ? stream.result : checkResult(stream.result);
    }

    /** An async iterator over the call's events; `.result` once it ends. */
    stream(tool, args = {}, { timeoutMs, model, display, signal } = {}) {
        const client = this;
        const frame = { type: 'tool_call', toolName: tool, arguments: args };
        if (timeoutMs !== undefined) frame.timeoutMs = timeoutMs;
        if (model) frame.resultFormat = 'model';
        if (display) frame.display = true;
        const out = {
            result: null,
            events: [],
            async *[Symbol.asyncIterator]() {
                await client.connect();
                const id = client._id();
                const queue = [];
                let wake = null;
                let final = null;
                let failure = null;
                let paused = false;
                const poke = () => { const w = wake; wake = null; w?.(); };
                client._pending.set(id, {
                    kind: 'tool_result',
                    conn: client._conn,
                    event: (e, conn) => {
                        queue.push(e);
                        if (queue.length >= EVENT_BUFFER && !paused) { paused = true; conn.pause(); }
                        poke();
                    },
                    done: (f) => { client._pending.delete(id); final = f; poke(); },
                    fail: (e) => { client._pending.delete(id); failure = e; poke(); },
                });
                const onAbort = () => { try { client._send({ type: 'cancel_tool_call', requestId: id }); } catch { /* gone */ } };
                signal?.addEventListener('abort', onAbort, { once: true });
                let finished = false;
                try {
                    client._send({ ...frame, requestId: id });
                    if (signal?.aborted) onAbort(); // aborted before it was sent
                    for (;;) {
                        if (queue.length > 0) {
                            const e = queue.shift();
                            if (paused && queue.length < EVENT_BUFFER / 2) { paused = false; client._conn?.resume(); }
                            out.events.push(e);
                            yield e;
                            continue;
                        }
                        if (failure) throw failure;
                        if (final) break;
                        await new Promise((r) => { wake = r; });
                    }
                    out.result = { ...(final.result ?? {}), events: out.events };
                    finished = true;
                } finally {
                    signal?.removeEventListener('abort', onAbort);
                    client._pending.delete(id);
                    if (paused) client._conn?.resume();
                    if (!finished && !failure) onAbort(); // left early: the tool is stopped too
                }
            },
        };
        return out;
    }

    close() {
        this._conn?.end();
        this._conn?.destroy();
        this._conn = null;
    }
}

/** Connects and says hello; rejects with NotRunning when no daemon answers. */
export async function connect(options) {
    return new Client(options).connect();
}
