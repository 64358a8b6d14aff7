// v2_server.mjs: an MCP server on the 2.x TypeScript SDK (@modelcontextprotocol/server 2.4.0),
// served by serveStdio, which speaks 2026-07-28 to a client that opens with server/discover
// and 2025-11-25 to one that opens with initialize. For tests/mcp/v2_source.mjs: meithd must
// discover it and speak 2026-07-28 to it (docs/protocol.md §17).
//   echo {text}      → "echo: TEXT"
//   confirm {what}   → input_required: an elicitation answered on the retry → "confirmed=BOOL"
//   touch            → notifications/resources/updated for info://hello, tools/list_changed
//   resource info://hello, prompt greet {name}
import { McpServer, inputRequired, acceptedContent } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod/v4';

function build() {
    const server = new McpServer({ name: 'v2-test', version: '0.1.0' },
        { capabilities: { resources: { subscribe: true, listChanged: true }, tools: { listChanged: true }, prompts: {} } });
    server.registerTool('echo', { description: 'Echo text', inputSchema: z.object({ text: z.string() }),
        annotations: { readOnlyHint: true } },
        async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }));
    server.registerTool('confirm', { description: 'Asks the user, by elicitation', inputSchema: z.object({ what: z.string() }) },
        async ({ what }, ctx) => {
            const schema = z.object({ ok: z.boolean() });
            const got = acceptedContent(ctx.mcpReq.inputResponses, 'ask', schema);
            if (got === undefined)
                return inputRequired({ inputRequests: { ask: inputRequired.elicit({ message: `Really ${what}?`, requestedSchema: schema }) },
                                       requestState: 'state-1' });
            return { content: [{ type: 'text', text: `confirmed=${got.ok}` }] };
        });
    server.registerTool('touch', { description: 'Sends resources/updated and tools/list_changed', inputSchema: z.object({}) },
        async () => {
            await server.server.sendResourceUpdated({ uri: 'info://hello' });
            await server.server.sendToolListChanged();
            return { content: [{ type: 'text', text: 'touched' }] };
        });
    server.registerResource('hello', 'info://hello', { mimeType: 'text/plain', description: 'A static resource' },
        async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello resource' }] }));
    server.registerPrompt('greet', { description: 'Greets', argsSchema: z.object({ name: z.string() }) },
        ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Say hi to ${name}` } }] }));
    return server;
}

serveStdio(build);
