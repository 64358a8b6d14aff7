// Types of meith/tool-host (tool-host.mjs): the tool-host protocol of docs/protocol.md §7, §13.

/** Writes a line to stderr, which meithd keeps in its log (redacted). */
export function log(...parts: unknown[]): void;

/** An expected failure of a tool: the call answers {"success":false,"error":message}. */
export class ToolError extends Error {}

/** Answered as ok:false with `type` as the wire type (e.g. "MethodNotFound"). */
export class HostError extends Error {
    constructor(type: string, detail: string);
}

/** Writes one protocol line to stdout. */
export function writeLine(obj: unknown): void;

/** What a request's handler gets besides its params. */
export interface RequestContext {
    id: string;
    method: string;
    /** Fires when meithd cancels this request (its caller cancelled, timed out or went
     *  away: the `cancel` method, docs/protocol.md §16) or the host shuts down (stdin closed). */
    readonly signal: AbortSignal;
    /** True once the request was cancelled: a flag to poll between steps. */
    readonly cancelled: boolean;
    /** Why it was cancelled — "cancelled", "timeout", "disconnected" or "shutdown"
     *  (docs/protocol.md §16) — or null while it runs. */
    readonly reason: string | null;
    /** Streams a typed event as it is. */
    event(e: { type: string; [key: string]: unknown }): void;
    /** Streams {"type":"part","payload":payload}. */
    emit(payload: unknown): void;
    progress(message: string, fraction?: number): void;
    logEvent(level: string, message: string): void;
}

export type MethodResult = { value?: unknown; state?: Record<string, unknown> } | void;
export type Method = (params: any, ctx: RequestContext) => Promise<MethodResult> | MethodResult;

/** Serves `methods` on stdin/stdout until stdin ends; `cancel` is answered unless `methods`
 *  has its own. Returns the requests running now, by id. */
export function serve(
    methods: Record<string, Method>,
    options?: { eofGraceMs?: number },
): { running: Map<string, RequestContext> };

/** Checks `value` against the subset of JSON Schema the host library understands. */
export function checkSchema(schema: object, value: unknown, where?: string): string | null;

export interface ToolContext extends RequestContext {
    /** The state meithd keeps for this host; replace or change it to update it. */
    state: Record<string, unknown>;
}

/** A tool taking an arguments object (checked against `parameters` before `run`). */
export interface FunctionTool {
    type?: 'function';
    name: string;
    description: string;
    parameters?: object;
    capabilities?: string[];
    timeoutMs?: number;
    run(args: any, ctx: ToolContext): unknown | Promise<unknown>;
}

/** A text-payload (custom, freeform) tool: `run` gets the payload string. */
export interface CustomTool {
    type: 'custom';
    name: string;
    description: string;
    format?: object;
    capabilities?: string[];
    timeoutMs?: number;
    run(payload: string, ctx: ToolContext): unknown | Promise<unknown>;
}

/** The tool-host protocol's optional methods, each answering {value, state?}. */
export interface OptionalMethods {
    format_tool_call_preview?: Method;
    format_tool_result?: Method;
    to_display_format?: Method;
    get_config_schema?: Method;
    get_ui_elements?: Method;
    get_tags?: Method;
    required_tags?: Method;
}

export function runToolHost(options: {
    tools: Array<FunctionTool | CustomTool>;
    init?: (config: Record<string, unknown>) => MethodResult | Promise<MethodResult>;
    nextState?: (state: Record<string, unknown>, toolName: string) => Record<string, unknown>;
    methods?: OptionalMethods;
    eofGraceMs?: number;
}): void;
