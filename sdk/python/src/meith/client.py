"""An asyncio client of meithd's socket protocol (docs/protocol.md §2-§4, §13).

Back-pressure is per connection: while one call's event queue is full, the reader waits, so
other replies on the same client wait too. Consume a stream's events (or leave it, which
frees them) before awaiting other requests on the same client inside its loop, or use a
second client.

One connection, one reader task. Replies are matched to requests by requestId; each call has
its own bounded event queue, so a slow consumer makes the reader wait (and the daemon, through
the socket, apply back-pressure) instead of memory growing. A lost connection fails what is in
flight with ``ConnectionLost``; the next request connects again (discovery included).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

#: Events buffered per call before the reader waits for the consumer.
EVENT_QUEUE = 256
#: Longest frame accepted from the daemon (its limits.max_frame_bytes default, plus slack).
MAX_FRAME_BYTES = 16 * 1024 * 1024


class NotRunning(ConnectionError):
    """No daemon answers on the socket (no socket file, or connection refused)."""


class ConnectionLost(ConnectionError):
    """The connection closed while a request was waiting for its answer."""


class ProtocolError(Exception):
    """meithd answered with an error frame, or sent something unreadable. ``code`` is the
    frame's code: PROTOCOL_ERROR for a malformed frame, else the refusal's (docs/protocol.md §3:
    FRAME_TOO_LARGE, NOT_ALLOWED, NO_SUCH_SOURCE, ...)."""

    def __init__(self, message: str, code: str = "PROTOCOL_ERROR"):
        super().__init__(message)
        self.code = code


class McpError(Exception):
    """A JSON-RPC error an MCP request got (``mcp_result`` with ``error``, docs/protocol.md
    §17): ``code`` (e.g. -32002 resource not found, -32001 permission denied), ``data``."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.data = data


#: Handlers for a server's requests during a call (docs/protocol.md §17), keyed by method:
#: ``sampling/createMessage``, ``elicitation/create``, ``roots/list``. Each takes the request's
#: params and returns its MCP result (or raises: the server then gets an error).
Handler = Callable[[dict], Awaitable[dict]]
_CAPABILITY_OF = {"sampling/createMessage": ("sampling", {}),
                  "elicitation/create": ("elicitation", {"form": {}, "url": {}}),
                  "roots/list": ("roots", {})}


class ToolCallError(Exception):
    """A call's result was ok:false. ``code``, ``message``, ``details`` and ``result``."""

    code = "TOOL_FAILED"

    def __init__(self, message: str, details: Any = None, result: "ToolResult | None" = None):
        super().__init__(message)
        self.message = message
        self.details = details
        self.result = result


class UnknownTool(ToolCallError):
    code = "UNKNOWN_TOOL"


class ValidationError(ToolCallError):
    code = "VALIDATION_ERROR"


class PermissionDenied(ToolCallError):
    code = "PERMISSION_DENIED"


class Timeout(ToolCallError):
    code = "TIMEOUT"


class Cancelled(ToolCallError):
    code = "CANCELLED"


class ToolFailed(ToolCallError):
    code = "TOOL_FAILED"


class RuntimeShuttingDown(ToolCallError):
    code = "RUNTIME_SHUTTING_DOWN"


class _ProtocolErrorCode(ToolCallError):
    code = "PROTOCOL_ERROR"


class RateLimited(ToolCallError):
    """A `[[limits.rates]]` bucket was empty; `details["retryAfterMs"]` says when to retry."""

    code = "RATE_LIMITED"


_BY_CODE = {c.code: c for c in (UnknownTool, ValidationError, PermissionDenied, Timeout,
                                 Cancelled, ToolFailed, RuntimeShuttingDown, _ProtocolErrorCode,
                                 RateLimited)}


@dataclass
class ToolResult:
    """A ToolResult (docs/protocol.md §4), and the call's streamed events."""

    ok: bool
    content: Any = None
    meta: dict | None = None
    diagnostics: list | None = None
    error: dict | None = None
    model_content: Any = None
    events: list = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    @classmethod
    def from_wire(cls, r: dict, events: list) -> "ToolResult":
        return cls(ok=bool(r.get("ok")), content=r.get("content"), meta=r.get("meta"),
                   diagnostics=r.get("diagnostics"), error=r.get("error"),
                   model_content=r.get("modelContent"), events=events, raw=r)

    def raise_for_error(self) -> "ToolResult":
        if not self.ok:
            err = self.error or {}
            cls = _BY_CODE.get(err.get("code"), ToolFailed)
            raise cls(err.get("message", "the tool failed"), err.get("details"), self)
        return self


def locate_socket(home: str | os.PathLike | None = None) -> Path:
    """Where meithd listens: ``socketPath`` in HOME/config.json, else the default socket
    path ($XDG_RUNTIME_DIR/meith/meithd.sock, else HOME/meithd.sock). HOME: ``home`` >
    $MEITH_HOME > ~/.meith (docs/protocol.md §1)."""
    base = Path(home or os.environ.get("MEITH_HOME") or Path.home() / ".meith").expanduser()
    try:
        record = json.loads((base / "config.json").read_text())
        path = record.get("socketPath") if isinstance(record, dict) else None
        if isinstance(path, str) and path:
            return Path(path) if os.path.isabs(path) else base / path
    except (OSError, ValueError):
        pass
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "meith" / "meithd.sock" if runtime else base / "meithd.sock"


class _Pending:
    def __init__(self, kind: str, connection: int):
        self.kind = kind
        self.connection = connection  # which connection it was sent on
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.events: asyncio.Queue = asyncio.Queue(maxsize=EVENT_QUEUE)
        self.closed = False  # its consumer left: events are dropped, not queued

    def close(self) -> None:
        """Frees a reader blocked on a full queue whose consumer has gone."""
        self.closed = True
        while not self.events.empty():
            self.events.get_nowait()


class Client:
    """A connection to meithd. Create with ``await meith.connect(...)``."""

    def __init__(self, *, home=None, socket=None, caller: str = "plugin",
                 name: str = "meith-python", agent: str | None = None,
                 handlers: dict[str, Handler] | None = None):
        self._handlers = dict(handlers or {})
        unknown = set(self._handlers) - set(_CAPABILITY_OF)
        if unknown:
            raise ValueError(f"no such server request: {sorted(unknown)}; one of {sorted(_CAPABILITY_OF)}")
        self._home = home
        self._socket = Path(socket) if socket else None
        self._caller = caller
        self._name = name
        self._agent = agent
        self._ids = itertools.count(1)
        self._prefix = f"py{os.getpid()}_{id(self):x}_"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task | None = None
        self._pending: dict[str, _Pending] = {}
        self._lock = asyncio.Lock()
        self._connection = 0  # counts connections; a reader fails only its own requests
        self.hello: dict | None = None
        self._client_tasks: set[asyncio.Task] = set()

    # ---- connection --------------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        return self._socket or locate_socket(self._home)

    async def _ensure(self) -> None:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return
            path = self.socket_path
            try:
                self._reader, self._writer = await asyncio.open_unix_connection(
                    str(path), limit=MAX_FRAME_BYTES)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise NotRunning(f"meithd is not running (no daemon at {path})") from e
            self._connection += 1
            self._task = asyncio.create_task(
                self._read_loop(self._reader, self._writer, self._connection))
            rid = self._next_id()
            info = {"name": self._name, "caller": self._caller}
            if self._agent:
                info["agent"] = self._agent
            hello = {"type": "hello", "requestId": rid, "clientInfo": info}
            if self._handlers:
                hello["capabilities"] = dict(_CAPABILITY_OF[m] for m in self._handlers)
            self.hello = await self._request(hello, rid, "hello_result", connected=True)

    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    async def _send(self, frame: dict) -> None:
        frame.setdefault("protocol", 1)
        writer = self._writer
        if writer is None or writer.is_closing():
            raise ConnectionLost("connection to meithd closed")
        try:
            writer.write(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
            await writer.drain()
        except ConnectionError as e:
            # The daemon went away: the next request connects again.
            self._writer = None
            writer.close()
            raise ConnectionLost(f"connection to meithd lost: {e}") from e

    async def _request(self, frame: dict, rid: str, kind: str, *, connected: bool = False) -> Any:
        if not connected:
            await self._ensure()
        p = _Pending(kind, self._connection)
        self._pending[rid] = p
        try:
            await self._send(frame)
            return await p.future
        finally:
            self._pending.pop(rid, None)

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         connection: int) -> None:
        error: Exception = ConnectionLost("connection to meithd closed")
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue
                if isinstance(frame, dict):
                    await self._dispatch(frame)
        except (ConnectionError, ValueError) as e:
            error = ConnectionLost(f"connection to meithd failed: {e}")
        finally:
            writer.close()
            if self._writer is writer:  # not a newer connection made meanwhile
                self._writer = None
            for p in list(self._pending.values()):
                if p.connection == connection and not p.future.done():
                    p.future.set_exception(error)

    async def _answer_client_request(self, frame: dict) -> None:
        """A server's request during one of our calls: the handler's result, or its error."""
        handler = self._handlers.get(frame.get("method"))
        reply: dict = {"type": "client_response", "clientRequestId": frame.get("clientRequestId")}
        try:
            if handler is None:
                raise McpError(-32601, f"no handler for {frame.get('method')}")
            reply["result"] = await handler(frame.get("params") or {})
        except McpError as e:
            reply["error"] = {"code": e.code, "message": str(e)}
        except Exception as e:  # the handler's failure is the server's error, not ours
            reply["error"] = {"code": -32603, "message": f"{type(e).__name__}: {e}"}
        try:
            await self._send(reply)
        except ConnectionError:
            pass

    async def _dispatch(self, frame: dict) -> None:
        rid = frame.get("requestId")
        p = self._pending.get(rid) if isinstance(rid, str) else None
        kind = frame.get("type")
        if kind == "client_request":
            task = asyncio.create_task(self._answer_client_request(frame))
            self._client_tasks.add(task)
            task.add_done_callback(self._client_tasks.discard)
            return
        if kind == "error":
            if p is not None and not p.future.done():
                p.future.set_exception(ProtocolError(frame.get("message", "protocol error"),
                                                     frame.get("code", "PROTOCOL_ERROR")))
            return
        if p is None:
            return
        if kind == "tool_event":
            if not p.closed:
                await p.events.put(frame.get("event"))  # waits while the consumer is behind
        elif kind == p.kind and not p.future.done():
            p.future.set_result(frame)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._writer = None

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ---- requests ----------------------------------------------------------------------

    async def list_tools(self, format: str = "meith", *, tags: list[str] | None = None,
                         models: list | None = None) -> list[dict]:
        """The tools, as ToolDescriptors or in a provider's ``format`` (openai,
        openai.responses, anthropic, mcp); ``tags`` / ``models`` as docs/protocol.md §13."""
        rid = self._next_id()
        frame: dict = {"type": "list_tools", "requestId": rid}
        if format != "meith":
            frame["format"] = format
        if tags is not None:
            frame["tags"] = tags
        if models is not None:
            frame["models"] = models
        return (await self._request(frame, rid, "tools_list"))["tools"]

    async def mcp_request(self, method: str, params: dict | None = None) -> dict:
        """An MCP request meithd answers from its MCP sources (docs/protocol.md §17):
        ``resources/list``, ``resources/read``, ``prompts/get``, ``completion/complete``, ...
        Returns the MCP result; raises McpError with the JSON-RPC error otherwise."""
        rid = self._next_id()
        frame = {"type": "mcp_request", "requestId": rid, "method": method, "params": params or {}}
        reply = await self._request(frame, rid, "mcp_result")
        if "error" in reply:
            e = reply["error"] if isinstance(reply["error"], dict) else {}
            raise McpError(e.get("code", -32603), e.get("message", "error"), e.get("data"))
        return reply["result"]

    async def list_sources(self) -> list[dict]:
        rid = self._next_id()
        return (await self._request({"type": "list_sources", "requestId": rid}, rid,
                                    "sources_list"))["sources"]

    async def preview(self, tool: str, arguments: Any = None) -> dict:
        """``{"text", "permission"}``: what a call would do, without running it."""
        rid = self._next_id()
        frame = {"type": "preview_tool_call", "requestId": rid, "toolName": tool}
        if arguments is not None:
            frame["arguments"] = arguments
        reply = await self._request(frame, rid, "tool_preview")
        return {"text": reply.get("text"), "permission": reply.get("permission")}

    async def call(self, tool: str, arguments: Any = None, *, timeout_ms: int | None = None,
                   model: bool = False, display: bool = False, check: bool = True) -> ToolResult:
        """Calls ``tool`` and returns its result (events in ``.events``). ``check``: raise the
        ToolCallError subclass of an ok:false result. Cancelling the awaiting task sends
        cancel_tool_call."""
        stream = self.stream(tool, arguments, timeout_ms=timeout_ms, model=model, display=display)
        async for _ in stream:
            pass
        result = stream.result
        assert result is not None
        return result.raise_for_error() if check else result

    def stream(self, tool: str, arguments: Any = None, *, timeout_ms: int | None = None,
               model: bool = False, display: bool = False) -> "CallStream":
        """An async iterator over the call's events; ``.result`` once it is exhausted."""
        return CallStream(self, tool, {} if arguments is None else arguments, timeout_ms, model,
                          display)


class CallStream:
    """``async for event in client.stream(...)``; then ``.result``."""

    def __init__(self, client: Client, tool: str, arguments: Any, timeout_ms, model, display):
        self._client = client
        self._frame: dict = {"type": "tool_call", "toolName": tool, "arguments": arguments}
        if timeout_ms is not None:
            self._frame["timeoutMs"] = timeout_ms
        if model:
            self._frame["resultFormat"] = "model"
        if display:
            self._frame["display"] = True
        self.result: ToolResult | None = None
        self._events: list = []

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._run()

    async def _run(self) -> AsyncIterator[Any]:
        c = self._client
        await c._ensure()
        rid = c._next_id()
        self._frame["requestId"] = rid
        p = _Pending("tool_result", c._connection)
        c._pending[rid] = p
        finished = False
        try:
            await c._send(self._frame)
            while not p.future.done():
                get = asyncio.ensure_future(p.events.get())
                await asyncio.wait({get, p.future}, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    get.cancel()
                    break
                event = get.result()
                if event is not None:
                    self._events.append(event)
                    yield event
            while not p.events.empty():  # events that arrived before the result
                event = p.events.get_nowait()
                if event is not None:
                    self._events.append(event)
                    yield event
            frame = await p.future
            self.result = ToolResult.from_wire(frame.get("result") or {}, self._events)
            finished = True
        finally:
            c._pending.pop(rid, None)
            p.close()
            if not finished and c._writer is not None and not c._writer.is_closing():
                # Cancelled (or abandoned): tell meithd, so the tool is stopped too.
                try:
                    await asyncio.shield(c._send({"type": "cancel_tool_call", "requestId": rid}))
                except (ConnectionError, RuntimeError):
                    pass


async def connect(*, home=None, socket=None, caller: str = "plugin", name: str = "meith-python",
                  agent: str | None = None, handlers: dict[str, Handler] | None = None) -> Client:
    """Connects and says hello; raises NotRunning when no daemon answers. ``handlers`` answer
    the servers' requests during this client's calls (sampling, elicitation, roots; §17)."""
    client = Client(home=home, socket=socket, caller=caller, name=name, agent=agent,
                    handlers=handlers)
    await client._ensure()
    return client
