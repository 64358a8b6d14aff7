// meith/tool-host: the meith tool-host protocol (docs/protocol.md §7, §13) over stdin/stdout,
// for Node.js hosts. Part of the `meith` npm package (sdk/node); types in tool-host.d.ts.
//
// The daemon writes one JSON request per line to our stdin:
//   {"v":1,"id":"…","method":"…","params":{…}}
// and we answer each one, exactly once, with one line on stdout:
//   {"v":1,"id":"…","ok":true,"result":{"value":…,"state":{…}}}
//   {"v":1,"id":"…","ok":false,"error":{"type":"…","detail":"…","stack":"…"}}
// Before the answer a request may stream events: {"v":1,"id":"…","event":{"type":"part",…}}.
// Requests overlap (they are multiplexed by id), so every request runs as its own async task.
// Stdout carries protocol lines only: log with `log()`, which writes to stderr.
//
// Two layers:
//   serve(methods)          the wire: framing, dispatch by method, events, errors, shutdown.
//   runToolHost({tools})    init / get_tool_schemas / execute_tool on top of it, from a list
//                           of tool definitions (see examples/node-host/host.mjs), plus the
//                           optional methods as given.
// Standard library only.

/** Writes a line to stderr, which the daemon keeps in its log (redacted). */
export function log(...parts) {
    process.stderr.write(`[host ${process.pid}] ${parts.join(' ')}\n`);
}

/**
 * An expected failure of a tool ("no such file", "path outside the root"): the call answers
 * {"success":false,"error":message}. Any other exception is a bug and answers ok:false with
 * its stack, which the daemon logs.
 */
export class ToolError extends Error {
    constructor(message) {
        super(message);
        this.name = 'ToolError';
    }
}

/** An error sent as-is in an ok:false answer, with `type` as its wire type. */
export class HostError extends Error {
    constructor(type, detail) {
        super(detail);
        this.name = type;
        this.stack = '';
    }
}

// Lines written during one turn of the event loop go out in one write(2): answers to requests
// that arrived together (the daemon batches them too) wake the daemon once, not once a line.
// They are written in the loop's check phase (setImmediate), and at exit: stdout is a pipe,
// and pipe writes are synchronous on Linux, so the 'exit' handler still gets them out.
let queuedLines = [];
let flushScheduled = false;

function flushLines() {
    flushScheduled = false;
    if (queuedLines.length === 0) return;
    const text = queuedLines.length === 1 ? queuedLines[0] : queuedLines.join('');
    queuedLines = [];
    process.stdout.write(text);
}
process.on('exit', flushLines);

/** Queues one protocol line; lines keep their order and leave by the end of this turn. */
export function writeLine(obj) {
    queueText(JSON.stringify(obj) + '\n');
}

/** Queues one line already encoded (with its newline). */
function queueText(text) {
    queuedLines.push(text);
    if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushLines);
    }
}

function isPlainObject(x) {
    return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function errorToWire(e) {
    if (e instanceof Error) {
        return { type: e.name || 'Error', detail: e.message, stack: e.stack ?? '' };
    }
    return { type: 'Error', detail: String(e), stack: '' };
}

/**
 * One request while its method runs: its context and what cancels it. The AbortController is
 * made on first use of `signal`, so a tool that never looks costs nothing.
 */
class RequestContext {
    constructor(id, method, answer) {
        // Contexts derived with Object.create(ctx) (adding `state`, say) read and change this
        // one through `_self`, so cancelling reaches the signal whichever one made it.
        this._self = this;
        this.id = id;
        this.method = method;
        this.done = false; // answered or cancelled: events are dropped
        this.reason = null; // why it was cancelled: cancelled | timeout | disconnected | shutdown
        this._controller = null;
        this._answer = answer;
    }
    /** Fires when this request is cancelled (cancel from the daemon) or the host shuts down. */
    get signal() {
        const self = this._self;
        if (self._controller === null) {
            self._controller = new AbortController();
            if (self.reason !== null) self._controller.abort(self._abortReason());
        }
        return self._controller.signal;
    }
    /** True once the request was cancelled: a flag a tool can poll between steps. */
    get cancelled() {
        return this._self.reason !== null;
    }
    cancel(reason) {
        if (this.reason !== null) return;
        this.reason = reason;
        if (reason !== 'shutdown') this.done = true; // meithd has forgotten the id
        if (this._controller !== null) this._controller.abort(this._abortReason());
    }
    _abortReason() {
        return new HostError(this.reason === 'shutdown' ? 'ShuttingDown' : 'Cancelled', `request ${this.id}: ${this.reason}`);
    }
    event(e) {
        const self = this._self;
        if (!self.done) self._answer(self.id, { event: e });
    }
    emit(payload) {
        this.event({ type: 'part', payload });
    }
    progress(message, fraction) {
        this.event({ type: 'progress', message, fraction });
    }
    logEvent(level, message) {
        this.event({ type: 'log', level, message });
    }
}

/**
 * Serves the protocol on stdin/stdout until stdin ends.
 *
 * `methods` maps a method name to `async (params, ctx) => ({value, state})`; a missing `state`
 * sends back `params.state`. A thrown error becomes an ok:false answer. `ctx` holds:
 *   id, method   of this request
 *   signal       an AbortSignal that fires when meithd cancels this request (its caller
 *                cancelled, timed out or went away: the `cancel` method, docs/protocol.md §16)
 *                or the host shuts down: stop timers and work
 *   cancelled    true once that happened, for tools that poll between steps
 *   emit(p)      streams a part event {"type":"part","payload":p}
 *   event(e)     streams a typed event as it is, e.g. {"type":"progress","message","fraction"}
 *   progress(message, fraction), logEvent(level, message)   shorthands for typed events
 * Events after the answer are dropped: the daemon has forgotten the id by then. So is the
 * answer of a cancelled request.
 *
 * `cancel` ({"id": <execute_tool request id>, "reason"}) is answered here, unless `methods`
 * has its own: ok:true with {"cancelled": <whether that request was still running>}.
 *
 * Stdin EOF aborts every request's `signal`, waits up to `eofGraceMs` for requests in flight
 * to answer, and exits with status 0.
 */
export function serve(methods, { eofGraceMs = 1000 } = {}) {
    const running = new Map(); // request id -> RequestContext
    let shuttingDown = false;
    let exitWhenIdle = false;

    // The daemon went away: nothing more can be answered.
    process.stdout.on('error', (e) => {
        log(`stdout failed (${e.code ?? e.message}); exiting`);
        process.exit(0);
    });

    const answer = (id, payload) => writeLine({ v: 1, id, ...payload });
    const fail = (id, type, detail) => answer(id, { ok: false, error: { type, detail, stack: '' } });

    async function handle(ctx, params) {
        const { id, method } = ctx;
        let line, encoded;
        try {
            const r = (await methods[method](params, ctx)) ?? {};
            // Encoded once, here: a value that cannot be sent (cycle, BigInt) is an error too.
            encoded = JSON.stringify({ v: 1, id, ok: true, result: { value: r.value ?? null, state: r.state ?? params.state ?? {} } }) + '\n';
        } catch (e) {
            if (ctx.reason === 'shutdown') {
                line = { ok: false, error: { type: 'ShuttingDown', detail: 'the host is shutting down', stack: '' } };
            } else {
                if (!(e instanceof HostError) && ctx.reason === null) log(`${method} ${id} failed: ${e?.stack ?? e}`);
                line = { ok: false, error: errorToWire(e) };
            }
        }
        const cancelled = ctx.done;
        ctx.done = true;
        if (!cancelled) {
            if (encoded !== undefined) queueText(encoded);
            else answer(id, line);
        }
    }

    function cancelRequest(id, params) {
        const target = running.get(typeof params.id === 'string' ? params.id : undefined);
        const reason = typeof params.reason === 'string' ? params.reason : 'cancelled';
        if (target !== undefined && !target.done) target.cancel(reason);
        answer(id, { ok: true, result: { value: { cancelled: target !== undefined }, state: params.state ?? {} } });
    }

    function onLine(text) {
        if (text.trim() === '') return;
        let msg;
        try {
            msg = JSON.parse(text);
        } catch {
            log(`ignoring a line that is not JSON: ${JSON.stringify(text.slice(0, 120))}`);
            return;
        }
        if (!isPlainObject(msg) || typeof msg.id !== 'string') {
            log('ignoring a request without a string id');
            return;
        }
        const { id, method } = msg;
        if (running.has(id)) {
            log(`ignoring request ${JSON.stringify(id)}: that id is already in flight`);
            return;
        }
        if (msg.v !== 1) return fail(id, 'UnsupportedVersion', `protocol version ${JSON.stringify(msg.v)} is not supported (expected 1)`);
        const params = msg.params ?? {};
        if (method === 'cancel' && !Object.hasOwn(methods, 'cancel')) {
            if (!isPlainObject(params)) return fail(id, 'InvalidParams', 'params must be an object');
            return cancelRequest(id, params);
        }
        if (typeof method !== 'string' || !Object.hasOwn(methods, method)) {
            return fail(id, 'MethodNotFound', `unknown method ${JSON.stringify(method)}`);
        }
        if (!isPlainObject(params)) return fail(id, 'InvalidParams', 'params must be an object');

        const ctx = new RequestContext(id, method, answer);
        if (shuttingDown) ctx.cancel('shutdown');
        running.set(id, ctx);
        handle(ctx, params).finally(() => {
            running.delete(id);
            if (exitWhenIdle && running.size === 0) process.exit(0);
        });
    }

    // Stdin EOF: the daemon is done with us.
    const onClose = () => {
        shuttingDown = true;
        for (const ctx of running.values()) ctx.cancel('shutdown');
        // One turn first: what the aborted signals set off (a tool's cleanup) gets to run.
        if (running.size === 0 || eofGraceMs <= 0) return void setImmediate(() => process.exit(0));
        exitWhenIdle = true;
        setTimeout(() => process.exit(0), eofGraceMs);
    };
    // Lines split by hand: readline costs more per line than the JSON.parse of a request.
    let partial = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => {
        const text = partial === '' ? chunk : partial + chunk;
        let start = 0;
        for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
            onLine(text.slice(start, nl));
            start = nl + 1;
        }
        partial = start === 0 ? text : text.slice(start);
    });
    process.stdin.on('end', () => {
        if (partial !== '') onLine(partial);
        partial = '';
        onClose();
    });

    return { running };
}

/**
 * Checks `value` against the subset of JSON Schema that tool parameters use: type, properties,
 * required, additionalProperties, items, enum, minimum/maximum, minLength/maxLength.
 * Returns the first problem as text, or null.
 */
export function checkSchema(schema, value, where = 'arguments') {
    const types = schema.type === undefined ? [] : [].concat(schema.type);
    const typeOf = (v) =>
        v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
    if (types.length > 0) {
        const actual = typeOf(value);
        const fits = types.some((t) => t === actual || (t === 'number' && actual === 'integer'));
        if (!fits) return `${where} must be ${types.join(' or ')}, not ${actual}`;
    }
    if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
        return `${where} must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`;
    }
    if (typeof value === 'number') {
        if (schema.minimum !== undefined && value < schema.minimum) return `${where} must be at least ${schema.minimum}`;
        if (schema.maximum !== undefined && value > schema.maximum) return `${where} must be at most ${schema.maximum}`;
    }
    if (typeof value === 'string') {
        if (schema.minLength !== undefined && value.length < schema.minLength) return `${where} must have at least ${schema.minLength} characters`;
        if (schema.maxLength !== undefined && value.length > schema.maxLength) return `${where} must have at most ${schema.maxLength} characters`;
    }
    if (Array.isArray(value) && schema.items) {
        for (let i = 0; i < value.length; i++) {
            const problem = checkSchema(schema.items, value[i], `${where}[${i}]`);
            if (problem) return problem;
        }
    }
    if (isPlainObject(value)) {
        const properties = schema.properties ?? {};
        for (const key of schema.required ?? []) {
            if (!Object.hasOwn(value, key)) return `${where}.${key} is required`;
        }
        for (const [key, v] of Object.entries(value)) {
            if (Object.hasOwn(properties, key)) {
                const problem = checkSchema(properties[key], v, `${where}.${key}`);
                if (problem) return problem;
            } else if (schema.additionalProperties === false) {
                return `${where}.${key} is not an accepted argument`;
            } else if (isPlainObject(schema.additionalProperties)) {
                const problem = checkSchema(schema.additionalProperties, v, `${where}.${key}`);
                if (problem) return problem;
            }
        }
    }
    return null;
}

/** The wire schema of a tool definition (OpenAI-style function, or custom/freeform). */
function toWireSchema(tool) {
    const extra = {};
    if (tool.capabilities !== undefined) extra.capabilities = tool.capabilities;
    if (tool.timeoutMs !== undefined) extra.timeoutMs = tool.timeoutMs;
    if (tool.type === 'custom') {
        const format = tool.format !== undefined ? { format: tool.format } : {};
        return { type: 'custom', name: tool.name, description: tool.description, ...format, ...extra };
    }
    const parameters = tool.parameters ?? { type: 'object', properties: {} };
    return { type: 'function', function: { name: tool.name, description: tool.description, parameters }, ...extra };
}

/**
 * Serves a list of tools. Each tool is
 *   { name, description, parameters: <JSON Schema>, capabilities: ["read-only", …],
 *     timeoutMs?: N, run: async (args, ctx) => result }
 * or a custom (freeform, text-payload) tool { type: "custom", name, description, format?,
 *   capabilities, run }, whose `run` gets the payload string.
 * `run` gets the arguments (already checked against `parameters`) and the serve() context plus
 * `ctx.state`, the state the daemon keeps for this host; replace or change it to update it.
 * Throw ToolError for an expected failure; return the result value otherwise.
 *
 * `methods` adds the tool-host protocol's optional methods (docs/protocol.md §13) as they are.
 * `init(config)` returns {value?, state?} (default {ready:true} and {}); throwing makes the
 * daemon treat the host as failed to start. `nextState(state, toolName)` runs before every
 * execute_tool, whether the tool exists or not.
 */
export function runToolHost({ tools, init = () => ({}), nextState = (state) => state, methods = {}, ...options }) {
    const byName = new Map();
    for (const tool of tools) {
        if (byName.has(tool.name)) throw new Error(`two tools are named ${tool.name}`);
        byName.set(tool.name, tool);
    }
    const failure = (error) => ({ success: false, error });
    // Requests that arrive while init runs (say, piped in by hand) wait for it to finish.
    let initDone = Promise.resolve();

    return serve(
        {
            // Optional methods of the tool-host protocol (format_tool_call_preview,
            // format_tool_result, to_display_format, get_config_schema, get_ui_elements,
            // get_tags, required_tags), each `async (params) => ({value, state?})`.
            ...methods,
            async init(params) {
                const config = params.config ?? {};
                if (!isPlainObject(config)) throw new HostError('InvalidParams', 'config must be an object');
                const running = Promise.resolve().then(() => init(config));
                initDone = running.then(() => {}, () => {});
                const r = (await running) ?? {};
                return { value: r.value ?? { ready: true }, state: r.state ?? {} };
            },

            async get_tool_schemas(params) {
                await initDone;
                return { value: tools.map(toWireSchema), state: params.state ?? {} };
            },

            async execute_tool(params, ctx) {
                await initDone;
                const name = params.tool_name;
                // The request's context (its lazy `signal` and `cancelled` stay live) plus state.
                const tctx = Object.create(ctx);
                tctx.state = nextState(params.state ?? {}, name);
                const tool = byName.get(name);
                if (!tool) return { value: failure(`unknown tool ${JSON.stringify(name)}`), state: tctx.state };

                // A custom (text-payload) tool gets meithd's `payload` string; object tools
                // their `arguments`.
                const args = params.payload_kind === 'text' ? params.payload : (params.arguments ?? {});
                if (tool.type !== 'custom') {
                    const problem = checkSchema(tool.parameters ?? { type: 'object' }, args);
                    if (problem) return { value: failure(`invalid arguments: ${problem}`), state: tctx.state };
                }
                try {
                    const result = await tool.run(args, tctx);
                    return { value: { success: true, result: result ?? null }, state: tctx.state };
                } catch (e) {
                    if (e instanceof ToolError) return { value: failure(e.message), state: tctx.state };
                    throw e;
                }
            },
        },
        options,
    );
}
