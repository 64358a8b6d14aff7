#!/usr/bin/env node
// A small MCP server over stdio for the e2e tests of the MCP source (tests/e2e/mcp_test.cpp):
// good and bad behaviour, chosen by flags and by the tool called. Node standard library only.
//
// Flags:
//   --no-init            never answer `initialize` (the start times out)
//   --revision=R         answer `initialize` with protocolVersion R (default: the one asked)
//   --init-error         answer `initialize` with a JSON-RPC error
//   --page-size=N        tools/list pages of N tools, with nextCursor (default: one page)
//   --garbage-first      write a line that is not JSON before anything else
//   --list-changed-early send notifications/tools/list_changed before answering initialize
//   --state=FILE         append every message received to FILE (one JSON line each)
//   --ignore-eof         keep running when stdin closes (until a signal ends it)
//   --silent-unknown     never answer a request it does not know (server/discover included)
//   --silent-before-init answer nothing before `initialize` (server/discover and ping included)
//   --shot               also offer `shot` (below)
//   --resources=NAME     offer resources: resources/list names fake://shared and fake://NAME
//                        (after --list-delay=MS), resources/read answers 'read from NAME'
//
// Tools (all `read-only`-annotated unless said otherwise):
//   echo {text}          content [{type:text}], structuredContent {text, revision}
//   fail                 isError: true with two text blocks
//   rpc_error            a JSON-RPC error {code:-32000, message, data}
//   slow {ms}            answers after ms (also when cancelled: the late answer must be dropped)
//   progress {steps}     notifications/progress per step (with the call's token), then answers
//   cancelled            the notifications/cancelled received so far
//   big {bytes}          a text block of that many bytes; the answer line starts with its id
//   big {bytes, late_id} waits until a `slow` call is in flight, then answers with its own id
//                        last (as the official SDKs write it) and the slow call's id nested in
//                        structuredContent first
//   wrong_id             first answers an id it was never sent, then the right one
//   garbage_exit         writes a non-JSON line and a partial line, then exits with status 3
//   ask {method}         sends the daemon a request (sampling/createMessage, roots/list, ping,
//                        elicitation/create) and returns the answer as structuredContent
//   log_secret           sends notifications/message carrying secrets, then answers
//   add_tool             adds the tool `added` (annotated destructive), sends list_changed
//   write_thing          annotated readOnlyHint false, destructiveHint false, openWorldHint false
//   wipe                 no annotations at all (the spec's defaults apply)
//   shot {format, name}  (--shot) `format` is required and has a default, as Playwright's
//                        browser_take_screenshot `type`: the server fills it when it is left
//                        out, so it accepts {name} alone; it answers the format it used
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const flags = new Map();
for (const a of process.argv.slice(2)) {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (m) flags.set(m[1], m[2] ?? true);
}

const readOnly = { readOnlyHint: true, destructiveHint: false, openWorldHint: false };
const obj = (properties = {}, required = []) => ({ type: 'object', properties, required });
const tools = [
  { name: 'echo', title: 'Echo', description: 'Echoes text', annotations: readOnly,
    inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...obj({ text: { type: 'string' } }, ['text']) },
    outputSchema: obj({ text: { type: 'string' }, revision: { type: 'string' } }) },
  { name: 'fail', description: 'Fails with isError', annotations: readOnly, inputSchema: obj() },
  { name: 'rpc_error', description: 'Answers a JSON-RPC error', annotations: readOnly, inputSchema: obj() },
  { name: 'slow', description: 'Answers after ms', annotations: readOnly, inputSchema: obj({ ms: { type: 'integer' } }) },
  { name: 'progress', description: 'Reports progress', annotations: readOnly, inputSchema: obj({ steps: { type: 'integer' } }) },
  { name: 'cancelled', description: 'Cancellations received', annotations: readOnly, inputSchema: obj() },
  { name: 'big', description: 'A big text block', annotations: readOnly, inputSchema: obj({ bytes: { type: 'integer' } }) },
  { name: 'wrong_id', description: 'Answers a foreign id first', annotations: readOnly, inputSchema: obj() },
  { name: 'garbage_exit', description: 'Garbage, a partial line, exit 3', annotations: readOnly, inputSchema: obj() },
  { name: 'ask', description: 'Asks the client something', annotations: readOnly, inputSchema: obj({ method: { type: 'string' } }, ['method']) },
  { name: 'log_secret', description: 'Logs secrets', annotations: readOnly, inputSchema: obj() },
  { name: 'add_tool', description: 'Adds a tool', annotations: readOnly, inputSchema: obj() },
  { name: 'write_thing', description: 'Writes, additive, closed world',
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false }, inputSchema: obj() },
  { name: 'wipe', description: 'No annotations', inputSchema: obj() },
];
if (flags.has('shot'))
  tools.push({ name: 'shot', description: 'Takes a shot', annotations: readOnly,
    inputSchema: obj({ format: { type: 'string', enum: ['png', 'jpeg'], default: 'png' }, name: { type: 'string' } },
      ['format', 'name']) });

let revision = null;
const cancelled = [];
const slowInFlight = new Set(); // ids of `slow` calls not yet answered
const waiting = new Map(); // our request id -> resolve
let nextOwnId = 0;

const write = (line) => process.stdout.write(line + '\n');
const send = (msg) => write(JSON.stringify({ jsonrpc: '2.0', ...msg }));
const text = (t) => ({ type: 'text', text: t });
const ask = (method, params, id) => new Promise((resolve) => {
  const rid = id ?? `q${++nextOwnId}`;
  waiting.set(JSON.stringify(rid), resolve);
  send({ id: rid, method, params });
});

if (flags.has('garbage-first')) write('this line is not JSON-RPC');

async function call(id, name, args, token) {
  switch (name) {
    case 'echo':
      return { content: [text(args.text)], structuredContent: { text: args.text, revision } };
    case 'fail':
      return { content: [text('first problem'), { type: 'image', data: '', mimeType: 'image/png' }, text('second problem')], isError: true };
    case 'rpc_error':
      throw { code: -32000, message: 'the fake server refused', data: { why: 'asked to' } };
    case 'slow':
      slowInFlight.add(id);
      await new Promise((r) => setTimeout(r, args.ms ?? 1000));
      slowInFlight.delete(id);
      return { content: [text('slow done')] };
    case 'progress': {
      const steps = args.steps ?? 3;
      for (let i = 1; i <= steps; ++i) {
        send({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps, message: `step ${i}` } });
        await new Promise((r) => setTimeout(r, 20));
      }
      return { content: [text('progress done')] };
    }
    case 'cancelled':
      return { content: [text(JSON.stringify(cancelled))], structuredContent: { cancelled } };
    case 'big': {
      if (args.late_id) {
        const deadline = Date.now() + 10000;
        while (slowInFlight.size === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        const other = [...slowInFlight][0] ?? null;
        write(`{"jsonrpc":"2.0","result":{"structuredContent":{"id":${JSON.stringify(other)}},"content":[{"type":"text","text":"${'x'.repeat(args.bytes ?? 1000)}"}]},"id":${JSON.stringify(id)}}`);
        return undefined;
      }
      // The id first, so that a line too long to parse still names its call.
      write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"${'x'.repeat(args.bytes ?? 1000)}"}]}}`);
      return undefined;
    }
    case 'wrong_id':
      send({ id: 987654, result: { content: [text('for nobody')] } });
      send({ id: 'not-sent', result: { content: [text('for nobody either')] } });
      return { content: [text('right answer')] };
    case 'garbage_exit':
      write('not json at all');
      process.stdout.write('{"jsonrpc":"2.0","id":', () => process.exit(3));
      return new Promise(() => {});
    case 'ask': {
      const params = args.method === 'sampling/createMessage'
        ? { messages: [{ role: 'user', content: text('hi') }], maxTokens: 10 }
        : args.method === 'elicitation/create' ? { message: 'name?', requestedSchema: obj() } : {};
      const answer = await ask(args.method, params, args.method === 'roots/list' ? 77 : undefined);
      return { content: [text(JSON.stringify(answer))], structuredContent: answer };
    }
    case 'log_secret':
      send({ method: 'notifications/message', params: { level: 'warning', logger: 'fake', data: { note: 'logged by the fake server', password: 'hunter2-very-secret' } } });
      send({ method: 'notifications/message', params: { level: 'error', data: 'token ghp_abcdefghijklmnopqrstuvwxyz0123456789 leaked' } });
      return { content: [text('logged')] };
    case 'add_tool':
      if (!tools.some((t) => t.name === 'added'))
        tools.push({ name: 'added', description: 'Appeared later', inputSchema: obj(),
          annotations: { readOnlyHint: false, destructiveHint: true } });
      setTimeout(() => send({ method: 'notifications/tools/list_changed' }), 10);
      return { content: [text('added')] };
    case 'write_thing':
    case 'wipe':
      return { content: [text(name)] };
    case 'shot': {
      const format = args.format ?? 'png'; // the server's own default
      if (!['png', 'jpeg'].includes(format) || typeof args.name !== 'string')
        throw { code: -32602, message: 'Invalid arguments for tool shot' };
      return { content: [text(`${args.name}.${format}`)] };
    }
    default:
      throw { code: -32602, message: `Unknown tool: ${name}` };
  }
}

function onRequest(msg) {
  const { id, method, params = {} } = msg;
  if (flags.has('silent-before-init') && revision === null && method !== 'initialize') return;
  switch (method) {
    case 'initialize':
      if (flags.has('no-init')) return;
      if (flags.has('list-changed-early')) send({ method: 'notifications/tools/list_changed' });
      if (flags.has('init-error')) {
        send({ id, error: { code: -32602, message: 'Unsupported protocol version', data: { supported: ['1999-01-01'] } } });
        return;
      }
      revision = typeof flags.get('revision') === 'string' ? flags.get('revision') : params.protocolVersion;
      send({ id, result: { protocolVersion: revision, capabilities: { tools: { listChanged: true }, logging: {},
        ...(flags.has('resources') ? { resources: {} } : {}) },
        serverInfo: { name: 'fake-mcp', version: '1.0.0' }, clientInfo: params.clientInfo } });
      return;
    case 'ping':
      send({ id, result: {} });
      return;
    case 'resources/list':
      if (!flags.has('resources')) break;
      setTimeout(() => send({ id, result: { resources: ['shared', flags.get('resources')].map(
        (n) => ({ uri: `fake://${n}`, name: n })) } }), Number(flags.get('list-delay') ?? 0));
      return;
    case 'resources/read':
      if (!flags.has('resources')) break;
      send({ id, result: { contents: [{ uri: params.uri, text: `read from ${flags.get('resources')}` }] } });
      return;
    case 'tools/list': {
      const size = Number(flags.get('page-size') ?? tools.length);
      const start = Number(params.cursor ?? 0);
      const page = tools.slice(start, start + size);
      const result = { tools: page };
      if (start + size < tools.length) result.nextCursor = String(start + size);
      send({ id, result });
      return;
    }
    case 'tools/call':
      call(id, params.name, params.arguments ?? {}, params._meta?.progressToken).then(
        (result) => { if (result !== undefined) send({ id, result }); },
        (error) => send({ id, error }));
      return;
    default:
      break;
  }
  if (flags.has('silent-unknown')) return;
  send({ id, error: { code: -32601, message: `Method not found: ${method}` } });
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (!line.trim()) return;
  if (typeof flags.get('state') === 'string') appendFileSync(flags.get('state'), line + '\n');
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.method === undefined) { // an answer to our own request
    const resolve = waiting.get(JSON.stringify(msg.id));
    if (resolve) { waiting.delete(JSON.stringify(msg.id)); resolve(msg); }
    return;
  }
  if (msg.id === undefined) { // a notification
    if (msg.method === 'notifications/cancelled') cancelled.push(msg.params);
    return;
  }
  onRequest(msg);
});
rl.on('close', () => {
  if (flags.has('ignore-eof')) setInterval(() => {}, 1000);
  else process.exit(0);
});
