#!/usr/bin/env node
// MCP baseline for bench/run: one `echo` tool, built the way the official TypeScript SDK's
// README shows (McpServer + registerTool + StdioServerTransport), run over stdio.
// The tool answers with its arguments as JSON text (and as structuredContent), the MCP
// counterpart of meithd's built-in echo whose content is its arguments.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'meith-bench-echo', version: '0.0.0' });

server.registerTool(
    'echo',
    {
        description: 'Echo the arguments back.',
        inputSchema: { s: z.string() },
    },
    async (args) => ({
        content: [{ type: 'text', text: JSON.stringify(args) }],
    }),
);

await server.connect(new StdioServerTransport());
