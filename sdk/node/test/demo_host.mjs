// A tool host on meith/tool-host for the SDK's tests: object, text-payload and streaming
// tools, and every optional method.
import { setTimeout as sleep } from 'node:timers/promises';
import { runToolHost, ToolError } from '../src/tool-host.mjs';

const ro = ['read-only'];
runToolHost({
    init: (config) => ({ value: { ready: true }, state: { greeting: config.greeting ?? 'hello' } }),
    tools: [
        { name: 'greet', description: 'Greets', capabilities: ro,
          parameters: { type: 'object', properties: { who: { type: 'string' } }, required: ['who'] },
          run: ({ who }, ctx) => `${ctx.state.greeting}, ${who}` },
        { type: 'custom', name: 'shout', description: 'Upper-cases its payload', format: { type: 'text' },
          capabilities: ro, run: (payload) => payload.toUpperCase() },
        { name: 'count', description: 'Streams 1..n', capabilities: ro,
          parameters: { type: 'object', properties: { n: { type: 'integer' } } },
          async run({ n = 3 }, ctx) {
              for (let i = 1; i <= n; i++) ctx.emit({ i });
              return { counted: n };
          } },
        { name: 'slow', description: 'Sleeps ms', capabilities: ro,
          parameters: { type: 'object', properties: { ms: { type: 'integer' } } },
          async run({ ms = 1000 }, ctx) { await sleep(ms, undefined, { signal: ctx.signal }); return 'slept'; } },
        { name: 'fail', description: 'Fails', capabilities: ro, run: () => { throw new ToolError('nope'); } },
        { name: 'write', description: 'Needs writes-files', capabilities: ['writes-files'], run: () => 'wrote' },
    ],
    methods: {
        format_tool_call_preview: ({ tool_name, arguments: a, state }) => ({ value: `about to ${tool_name} ${JSON.stringify(a)}`, state }),
        format_tool_result: ({ result, state }) => ({ value: result.success ? `=> ${JSON.stringify(result.result)}` : `Error: ${result.error}`, state }),
        to_display_format: ({ text, state }) => ({ value: { type: 'text', content: `[${text}]` }, state }),
        get_config_schema: () => ({ value: { type: 'object', properties: { greeting: { type: 'string' } } } }),
        get_ui_elements: () => ({ value: [] }),
        get_tags: ({ models }) => ({ value: ['node', ...models.map((m) => `m:${m.name ?? m}`)] }),
        required_tags: () => ({ value: [] }),
    },
});
