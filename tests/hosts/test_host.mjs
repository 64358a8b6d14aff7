#!/usr/bin/env node
// A tool host for the daemon's end-to-end tests: each tool is one behaviour to observe
// (streaming, hangs, crashes, garbage on stdout, failures, big results, state keeping, …),
// and argv flags make the process itself misbehave. It speaks the protocol through the
// example host's wire layer (serve) but none of its tool conveniences: no argument checking,
// so the daemon's own validation is what tests see.
//
// Flags:
//   --name-prefix=X          prepend X to every tool name (two instances can coexist)
//   --crash-on-init          exit(2) upon receiving init
//   --exit-after-init-ms=N   exit(4) N ms after answering init (crash loops)
//   --exit-after-list        exit(4) just after answering get_tool_schemas (crash loops with
//                            the tools registered)
//   --start-delay-ms=N       answer init after N ms
//   --hold-init-while=PATH   answer init only once PATH does not exist (checked every 20 ms):
//                            a test holds a restart in its handshake for as long as it needs
//   --pid-file=PATH          append this process's pid and a newline to PATH at startup
//   --garbage-on-start       print a non-JSON line to stdout before anything else
//   --stderr-secret          print secret-looking text to stderr at startup (log redaction)
//   --optional-methods       also implement every optional method of the tool-host protocol
//                            (format_tool_call_preview, format_tool_result, to_display_format,
//                            get_config_schema, get_ui_elements, get_tags, required_tags);
//                            without it they are missing (MethodNotFound)
//   --required-tags=A,B      required_tags() answers [A, B] (with --optional-methods)
//   --hang-preview           format_tool_call_preview never answers (with --optional-methods)
//   --no-cancel              answer the `cancel` method MethodNotFound (a host that cannot
//                            stop work: the tool runs on after its caller is answered)
//   --config-schema          get_config_schema() answers a schema even without
//                            --optional-methods: {level: integer >= 1}
//
// State: init returns {"calls":0}; every execute_tool returns {"calls": params.state.calls + 1},
// and t_state's result is that new count.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { HostError, serve, writeLine } from '../../sdk/node/src/tool-host.mjs';

// ---------------------------------------------------------------------------------------------
// Flags

const flags = {
    namePrefix: '',
    crashOnInit: false,
    exitAfterInitMs: null,
    exitAfterList: false,
    startDelayMs: 0,
    holdInitWhile: null,
    pidFile: null,
    garbageOnStart: false,
    stderrSecret: false,
    optionalMethods: false,
    requiredTags: [],
    configSchema: false,
    hangPreview: false,
    noCancel: false,
};

function parseMs(arg, value) {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) usage(`${arg}: expected a whole number of milliseconds`);
    return n;
}

function usage(problem) {
    process.stderr.write(`test_host: ${problem}\n`);
    process.exit(64);
}

for (const arg of process.argv.slice(2)) {
    const eq = arg.indexOf('=');
    const [key, value] = eq < 0 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)];
    switch (key) {
        case '--name-prefix': flags.namePrefix = value ?? ''; break;
        case '--crash-on-init': flags.crashOnInit = true; break;
        case '--exit-after-init-ms': flags.exitAfterInitMs = parseMs(arg, value); break;
        case '--exit-after-list': flags.exitAfterList = true; break;
        case '--start-delay-ms': flags.startDelayMs = parseMs(arg, value); break;
        case '--hold-init-while':
            if (!value) usage('--hold-init-while needs a path');
            flags.holdInitWhile = value;
            break;
        case '--pid-file':
            if (!value) usage('--pid-file needs a path');
            flags.pidFile = value;
            break;
        case '--garbage-on-start': flags.garbageOnStart = true; break;
        case '--stderr-secret': flags.stderrSecret = true; break;
        case '--optional-methods': flags.optionalMethods = true; break;
        case '--required-tags': flags.requiredTags = (value ?? '').split(',').filter(Boolean); break;
        case '--config-schema': flags.configSchema = true; break;
        case '--hang-preview': flags.hangPreview = true; break;
        case '--no-cancel': flags.noCancel = true; break;
        default: usage(`unknown argument ${JSON.stringify(arg)}`);
    }
}

if (flags.garbageOnStart) process.stdout.write('test_host says hello: this line is not a protocol frame\n');
if (flags.pidFile) fs.appendFileSync(flags.pidFile, `${process.pid}\n`);
if (flags.stderrSecret) {
    process.stderr.write('api_key=sk-live-THISISSECRET12345 token: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n');
}

// ---------------------------------------------------------------------------------------------
// Tools: name -> {schema fields, run(args, ctx) -> execute_tool value}

const ok = (result) => ({ success: true, result });
const obj = (properties = {}) => ({ type: 'object', properties });
const RO = ['read-only'];

const tools = {
    t_echo: { parameters: obj(), run: (args) => ok(args) },
    t_typed: {
        parameters: {
            type: 'object',
            properties: { n: { type: 'integer', minimum: 0 } },
            required: ['n'],
            additionalProperties: false,
        },
        run: (args) => ok({ n: args.n }),
    },
    t_stream: {
        parameters: obj({ n: { type: 'integer' }, interval_ms: { type: 'integer' }, pad: { type: 'integer' } }),
        async run({ n = 3, interval_ms = 10, pad = 0 }, ctx) {
            for (let i = 1; i <= n; i++) {
                if (interval_ms > 0) await sleep(interval_ms, undefined, { signal: ctx.signal });
                ctx.emit(pad > 0 ? { i, pad: 'x'.repeat(pad) } : { i });
            }
            return ok({ done: n });
        },
    },
    t_sleep: {
        parameters: obj({ ms: { type: 'integer' } }),
        async run({ ms = 1000 }, ctx) {
            await sleep(ms, undefined, { signal: ctx.signal });
            return ok({ slept: ms });
        },
    },
    // Appends "tick N" to `path` every `interval_ms` until `ticks` are written or the request
    // is cancelled (ctx.signal): tests watch the file to see the work stop (§16). Declared
    // read-only like the rest, so tests run it with sandbox = "off".
    t_ticker: {
        parameters: obj({ path: { type: 'string' }, interval_ms: { type: 'integer' }, ticks: { type: 'integer' } }),
        async run({ path, interval_ms = 20, ticks = 1000 }, ctx) {
            for (let i = 1; i <= ticks; i++) {
                if (ctx.cancelled) break;
                fs.appendFileSync(path, `tick ${i}\n`);
                try {
                    await sleep(interval_ms, undefined, { signal: ctx.signal });
                } catch {
                    fs.appendFileSync(path, `stopped: ${ctx.signal.reason?.message ?? 'aborted'}\n`);
                    break;
                }
            }
            return ok({ ticked: true });
        },
    },
    t_hang: { parameters: obj(), run: () => new Promise(() => {}) },
    t_crash: {
        parameters: obj({ code: { type: 'integer' } }),
        run: ({ code }) => process.exit(code ?? 3),
    },
    t_garbage: {
        parameters: obj(),
        run() {
            process.stdout.write('this is not json {{{\n');
            writeLine({ v: 1, id: 'nope', ok: true, result: { value: 1 } });
            return ok('after-garbage');
        },
    },
    t_fail: { parameters: obj(), run: () => ({ success: false, error: 'tool said no' }) },
    t_throw: {
        parameters: obj(),
        run() {
            const e = new TypeError('boom');
            e.stack = 'TypeError: boom\n    at t_throw (test_host.mjs:1:1)';
            throw e;
        },
    },
    t_big: {
        parameters: obj({ bytes: { type: 'integer' } }),
        run: ({ bytes = 0 }) => ok('x'.repeat(bytes)),
    },
    t_toolresult: {
        parameters: obj(),
        run: () => ok({ ok: true, content: { already: 'enveloped' }, meta: { m: 1 } }),
    },
    t_state: { parameters: obj(), run: (args, ctx) => ok(ctx.calls) },
    t_pid: { parameters: obj(), run: () => ok(process.pid) },
    // Leaves a `sleep` in its own process group (pid appended to args.pid_file), then crashes.
    t_orphan: {
        parameters: obj({ pid_file: { type: 'string' } }),
        run({ pid_file }) {
            const child = spawn('sleep', ['30'], { stdio: ['ignore', 'inherit', 'inherit'] });
            if (pid_file) fs.appendFileSync(pid_file, `${child.pid}\n`);
            setTimeout(() => process.exit(3), 50);
            return new Promise(() => {});
        },
    },
    t_secret: {
        parameters: obj({ token: { type: 'string' } }),
        run: ({ token }) => ok({ echo: token, note: 'Bearer abcdefghijklmnop1234' }),
    },
    t_write: { capabilities: ['writes-files'], parameters: obj(), run: () => ok('wrote') },
    t_nocaps: { capabilities: null, parameters: obj(), run: () => ok('ran') },
    // A text-payload tool: answers with what it got, and its kind.
    t_custom: { custom: true, run: (payload) => ok({ got: payload, kind: typeof payload }) },
};

function schemaOf(name, tool) {
    const fullName = flags.namePrefix + name;
    const caps = tool.capabilities === null ? {} : { capabilities: tool.capabilities ?? RO };
    if (tool.custom) {
        return { type: 'custom', name: fullName, description: 'freeform', format: { type: 'text' }, ...caps };
    }
    return {
        type: 'function',
        function: { name: fullName, description: `test tool ${name}`, parameters: tool.parameters },
        ...caps,
    };
}

function lookup(fullName) {
    if (typeof fullName !== 'string' || !fullName.startsWith(flags.namePrefix)) return undefined;
    const name = fullName.slice(flags.namePrefix.length);
    return Object.hasOwn(tools, name) ? tools[name] : undefined;
}

// ---------------------------------------------------------------------------------------------

// The optional methods, each answering in a way a test can recognise.
const optional = {
    async format_tool_call_preview({ tool_name, arguments: args, state }) {
        if (flags.hangPreview && tool_name !== '') return new Promise(() => {}); // the probe answers
        return { value: `would run ${tool_name} with ${JSON.stringify(args)}`, state };
    },
    async format_tool_result({ result, state }) {
        const inner = result?.result;
        if (inner && typeof inner === 'object' && inner.native) {
            // A provider-native envelope, passed through byte for byte by meithd.
            return {
                value: { type: 'provider_native_tool_result', format: 'openai.responses', output: [{ type: 'output_text', text: String(inner.native) }] },
                state,
            };
        }
        if (inner && typeof inner === 'object' && inner.object) return { value: { plain: inner.object }, state };
        return { value: result?.success ? `model sees: ${JSON.stringify(inner)}` : `model sees failure: ${result?.error}`, state };
    },
    async to_display_format({ text, state }) {
        return { value: { type: 'markdown', content: `**${text}**` }, state };
    },
    async get_config_schema() {
        return { value: { type: 'object', properties: { level: { type: 'integer', minimum: 1 } }, additionalProperties: true } };
    },
    async get_ui_elements() { return { value: [] }; },
    async get_tags({ models }) { return { value: ['tested', ...(models ?? []).map((m) => `for-${m?.name ?? m}`)] }; },
    async required_tags() { return { value: flags.requiredTags }; },
};

serve(
    {
        ...(flags.optionalMethods ? optional : {}),
        ...(flags.configSchema ? { get_config_schema: optional.get_config_schema } : {}),
        ...(flags.noCancel
            ? { cancel: () => { throw new HostError('MethodNotFound', 'unknown method "cancel"'); } }
            : {}),
        async init() {
            if (flags.crashOnInit) process.exit(2);
            if (flags.startDelayMs > 0) await sleep(flags.startDelayMs);
            while (flags.holdInitWhile && fs.existsSync(flags.holdInitWhile)) await sleep(20);
            if (flags.exitAfterInitMs !== null) setTimeout(() => process.exit(4), flags.exitAfterInitMs);
            return { value: { ready: true, pid: process.pid }, state: { calls: 0 } };
        },

        async get_tool_schemas(params) {
            // Exit once the answer is out (written before any timer runs): its tools are
            // always registered before it crashes.
            if (flags.exitAfterList) setTimeout(() => process.exit(4), 20);
            return { value: Object.entries(tools).map(([name, tool]) => schemaOf(name, tool)), state: params.state };
        },

        async execute_tool(params, ctx) {
            const previous = params.state?.calls;
            const calls = (Number.isInteger(previous) ? previous : 0) + 1;
            const state = { ...(params.state ?? {}), calls };
            const tool = lookup(params.tool_name);
            if (!tool) return { value: { success: false, error: `unknown tool ${JSON.stringify(params.tool_name)}` }, state };
            // A text-payload tool gets the string as `payload` (docs/protocol.md §13).
            const args = params.payload_kind === 'text' ? params.payload : (params.arguments ?? {});
            const value = await tool.run(args, Object.assign(Object.create(ctx), { calls }));
            return { value, state };
        },
    },
    { eofGraceMs: 0 }, // stdin EOF: exit 0 at once, even with t_hang in flight
);
