// everything_server.mjs: the stdio MCP server behind `meith mcp` in the conformance suite's
// server scenarios (server.sh: suite → HTTP bridge → `meith mcp` → meithd → this, a
// `kind = "mcp"` source). It serves the tools, resources, prompts, completion and logging the
// scenarios call, ported from the suite's own example server
// (examples/servers/typescript/everything-server.ts of @modelcontextprotocol/conformance,
// MIT licensed) to the 1.x SDK's McpServer over stdio. Every tool says it only reads
// (readOnlyHint), so meithd, trusting the annotations, runs this server confined read-only.
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
    ElicitResultSchema, CreateMessageResultSchema, ListToolsRequestSchema,
    SubscribeRequestSchema, UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='; // 1x1 red PNG
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='; // minimal WAV
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });

const mcp = new McpServer({ name: 'meith-conformance-everything', version: '1.0.0' }, {
    capabilities: {
        tools: { listChanged: true }, resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true }, logging: {}, completions: {},
    },
});
const server = mcp.server;
const readOnly = { readOnlyHint: true, openWorldHint: false };
const tool = (name, description, inputSchema, cb) =>
    mcp.registerTool(name, { description, inputSchema, annotations: readOnly }, cb);

// ===== tools =====
tool('test_simple_text', 'Tests simple text content response', {},
    async () => text('This is a simple text response for testing.'));
tool('test_image_content', 'Tests image content response', {},
    async () => ({ content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }] }));
tool('test_audio_content', 'Tests audio content response', {},
    async () => ({ content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }] }));
tool('test_embedded_resource', 'Tests embedded resource content response', {}, async () => ({
    content: [{ type: 'resource', resource: {
        uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
}));
tool('test_multiple_content_types', 'Tests response with multiple content types (text, image, resource)', {},
    async () => ({ content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: IMAGE, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }) } },
    ] }));
tool('test_tool_with_logging', 'Tests tool that emits log messages during execution', {},
    async (_args, { sendNotification }) => {
        for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
            if (i) await sleep(50);
            await sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
        }
        return text('Tool with logging executed successfully');
    });
tool('test_tool_with_progress', 'Tests tool that reports progress notifications', {},
    async (_args, { sendNotification, _meta }) => {
        const progressToken = _meta?.progressToken ?? 0;
        for (const progress of [0, 50, 100]) {
            if (progress) await sleep(50);
            await sendNotification({ method: 'notifications/progress',
                params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
        }
        return text(String(progressToken));
    });
tool('test_error_handling', 'Tests error response handling', {}, async () => {
    throw new Error('This tool intentionally returns an error for testing');
});
// SEP-1699 closes the HTTP stream mid-call: over stdio there is no stream to close.
tool('test_reconnection', 'Tests SSE stream disconnection and client reconnection (SEP-1699)', {},
    async () => { await sleep(100); return text('Reconnection test completed successfully.'); });
tool('test_sampling', 'Tests server-initiated sampling (LLM completion request)',
    { prompt: z.string().describe('The prompt to send to the LLM') }, async ({ prompt }) => {
        try {
            const r = await server.request({ method: 'sampling/createMessage', params: {
                messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 } },
            CreateMessageResultSchema);
            return text(`LLM response: ${r.content?.text ?? 'No response'}`);
        } catch (e) {
            return text(`Sampling not supported or error: ${e.message}`);
        }
    });
const elicit = async (message, properties, required, prefix) => {
    try {
        const r = await server.request({ method: 'elicitation/create',
            params: { message, requestedSchema: { type: 'object', properties, required } } }, ElicitResultSchema);
        return text(`${prefix}: action=${r.action}, content=${JSON.stringify(r.content || {})}`);
    } catch (e) {
        return text(`Elicitation not supported or error: ${e.message}`);
    }
};
tool('test_elicitation', 'Tests server-initiated elicitation (user input request)',
    { message: z.string().describe('The message to show the user') },
    async ({ message }) => elicit(message,
        { response: { type: 'string', description: "User's response" } }, ['response'], 'User response'));
tool('test_elicitation_sep1034_defaults', 'Tests elicitation with default values per SEP-1034', {},
    async () => elicit('Please review and update the form fields with defaults', {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true },
    }, [], 'Elicitation completed'));
const titled = (prefix, names) => names.map((title, i) => ({ const: `${prefix}${i + 1}`, title }));
tool('test_elicitation_sep1330_enums', 'Tests elicitation with enum schema improvements per SEP-1330', {},
    async () => elicit('Please select options from the enum fields', {
        untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
        titledSingle: { type: 'string', description: 'Select one option with titles',
            oneOf: titled('value', ['First Option', 'Second Option', 'Third Option']) },
        legacyEnum: { type: 'string', description: 'Select one option (legacy)', enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3,
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: { type: 'array', description: 'Select multiple options with titles', minItems: 1, maxItems: 3,
            items: { anyOf: titled('value', ['First Choice', 'Second Choice', 'Third Choice']) } },
    }, [], 'Elicitation completed'));
// SEP-1613: validated with zod, but listed with the raw 2020-12 schema below ($schema, $defs,
// additionalProperties), which the SDK's conversion of a zod shape would not keep.
tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)', {
    name: z.string().optional(),
    address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional(),
}, async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`));
const JSON_SCHEMA_2020_12 = {
    $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object',
    $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
    additionalProperties: false,
};
const listTools = server._requestHandlers.get('tools/list'); // McpServer's own, wrapped
server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const result = await listTools(request, extra);
    for (const t of result.tools) if (t.name === 'json_schema_2020_12_tool') t.inputSchema = JSON_SCHEMA_2020_12;
    return result;
});

// ===== resources =====
const resource = (name, uri, title, description, mimeType, body) =>
    mcp.registerResource(name, uri, { title, description, mimeType },
        async () => ({ contents: [{ uri, mimeType, ...body }] }));
resource('static-text', 'test://static-text', 'Static Text Resource', 'A static text resource for testing',
    'text/plain', { text: 'This is the content of the static text resource.' });
resource('static-binary', 'test://static-binary', 'Static Binary Resource',
    'A static binary resource (image) for testing', 'image/png', { blob: IMAGE });
resource('watched-resource', 'test://watched-resource', 'Watched Resource',
    'A resource that can be subscribed to', 'text/plain', { text: 'Watched resource content' });
mcp.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', description: 'A resource template with parameter substitution', mimeType: 'application/json' },
    async (uri, { id }) => ({ contents: [{ uri: uri.toString(), mimeType: 'application/json',
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }));
const subscriptions = new Set();
const log = (data) => server.sendLoggingMessage({ level: 'info', logger: 'everything', data }).catch(() => {});
server.setRequestHandler(SubscribeRequestSchema, async ({ params: { uri } }) => {
    subscriptions.add(uri);
    log(`Subscribed to resource: ${uri}`);
    // The watched resource "changes" once, soon after the subscription.
    setTimeout(() => subscriptions.has(uri) && server.sendResourceUpdated({ uri }).catch(() => {}), 50);
    return {};
});
server.setRequestHandler(UnsubscribeRequestSchema, async ({ params: { uri } }) => {
    subscriptions.delete(uri);
    log(`Unsubscribed from resource: ${uri}`);
    return {};
});

// ===== prompts (and completion, through completable arguments) =====
const user = (content) => ({ role: 'user', content });
mcp.registerPrompt('test_simple_prompt', { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
    async () => ({ messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] }));
const suggest = (description, values) =>
    completable(z.string().describe(description), (v) => values.filter((s) => s.startsWith(v ?? '')));
mcp.registerPrompt('test_prompt_with_arguments', {
    title: 'Prompt With Arguments', description: 'A prompt with required arguments',
    argsSchema: { arg1: suggest('First test argument', ['paris', 'park', 'party']),
        arg2: suggest('Second test argument', ['hello', 'world']) },
}, async ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] }));
mcp.registerPrompt('test_prompt_with_embedded_resource', {
    title: 'Prompt With Embedded Resource', description: 'A prompt that includes an embedded resource',
    argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') },
}, async ({ resourceUri }) => ({ messages: [
    user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
    user({ type: 'text', text: 'Please process the embedded resource above.' }),
] }));
mcp.registerPrompt('test_prompt_with_image', { title: 'Prompt With Image', description: 'A prompt that includes image content' },
    async () => ({ messages: [
        user({ type: 'image', data: IMAGE, mimeType: 'image/png' }),
        user({ type: 'text', text: 'Please analyze the image above.' }),
    ] }));

// logging/setLevel: the SDK's own handler (the logging capability above) answers {}.
await mcp.connect(new StdioServerTransport());
