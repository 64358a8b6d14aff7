// roots_server.mjs: an MCP server (the 1.x SDK's McpServer over stdio) whose one tool, `roots`,
// asks its client for roots/list during the call and returns what it got — for the roots
// check of tests/mcp/families.mjs (server-everything asks for roots only at start).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'roots-probe', version: '1.0.0' });
server.registerTool('roots', { description: 'Lists the client roots, asked during the call' }, async () => {
    const r = await server.server.listRoots();
    return { content: [{ type: 'text', text: JSON.stringify(r.roots) }], structuredContent: { roots: r.roots } };
});
await server.connect(new StdioServerTransport());
