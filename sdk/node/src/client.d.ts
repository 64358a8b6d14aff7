// Types of meith/client (client.mjs): the socket protocol of docs/protocol.md §2-§4, §13.

export const EVENT_BUFFER: number;
export class NotRunning extends Error {}
export class ConnectionLost extends Error {}
export class ProtocolError extends Error {}

export type ErrorCode = 'UNKNOWN_TOOL' | 'VALIDATION_ERROR' | 'PERMISSION_DENIED' | 'TIMEOUT' |
    'CANCELLED' | 'TOOL_FAILED' | 'RUNTIME_SHUTTING_DOWN' | 'PROTOCOL_ERROR' | 'RATE_LIMITED';

export interface ToolResult {
    ok: boolean;
    content?: unknown;
    meta?: Record<string, unknown>;
    diagnostics?: unknown[];
    error?: { code: ErrorCode; message: string; details?: unknown };
    modelContent?: unknown;
    events: unknown[];
}

export class ToolCallError extends Error {
    code: ErrorCode;
    details: unknown;
    result: ToolResult;
}
export const errors: {
    UnknownTool: typeof ToolCallError; ValidationError: typeof ToolCallError;
    PermissionDenied: typeof ToolCallError; Timeout: typeof ToolCallError;
    Cancelled: typeof ToolCallError; ToolFailed: typeof ToolCallError;
    RuntimeShuttingDown: typeof ToolCallError; ProtocolError: typeof ToolCallError;
    RateLimited: typeof ToolCallError;
};
export function checkResult(result: ToolResult): ToolResult;
export function locateSocket(home?: string): string;

/** Answers a server's request during one of the client's calls (docs/protocol.md §17). */
export type ServerRequestHandler = (params: Record<string, unknown>) => Promise<Record<string, unknown>>;
export interface ClientOptions {
    home?: string; socket?: string; caller?: 'cli' | 'plugin'; name?: string; agent?: string;
    /** Declared in hello as the MCP client capabilities sampling, elicitation, roots. */
    handlers?: Partial<Record<'sampling/createMessage' | 'elicitation/create' | 'roots/list', ServerRequestHandler>>;
}
/** A JSON-RPC error an MCP request got: e.g. -32002 resource not found, -32001 permission denied. */
export class McpError extends Error { code: number; data?: unknown; }
export interface CallOptions { timeoutMs?: number; model?: boolean; display?: boolean; signal?: AbortSignal; check?: boolean; }
export interface CallStream extends AsyncIterable<unknown> { result: ToolResult | null; events: unknown[]; }

export class Client {
    constructor(options?: ClientOptions);
    hello: Record<string, unknown> | null;
    connect(): Promise<this>;
    listTools(options?: { format?: 'meith' | 'openai' | 'openai.responses' | 'anthropic' | 'mcp'; tags?: string[]; models?: unknown[] }): Promise<any[]>;
    listSources(): Promise<any[]>;
    /** resources/list, resources/read, prompts/get, completion/complete, ... (docs/protocol.md §17). */
    mcpRequest(method: string, params?: Record<string, unknown>): Promise<any>;
    preview(tool: string, args?: unknown): Promise<{ text: string; permission: 'allow' | 'deny' }>;
    call(tool: string, args?: unknown, options?: CallOptions): Promise<ToolResult>;
    stream(tool: string, args?: unknown, options?: CallOptions): CallStream;
    close(): void;
}
export function connect(options?: ClientOptions): Promise<Client>;
