"""The tool-host protocol (docs/protocol.md §7, §13) over stdin/stdout, for Python plugins.

meithd writes one request per line to stdin::

    {"v":1,"id":"…","method":"…","params":{…}}

and gets exactly one answer per request on stdout, maybe after streamed events::

    {"v":1,"id":"…","ok":true,"result":{"value":…,"state":{…}}}
    {"v":1,"id":"…","ok":false,"error":{"type":"…","detail":"…","stack":"…"}}
    {"v":1,"id":"…","event":{"type":"part","payload":…}}

Requests overlap: each runs as its own asyncio task; a synchronous plugin method runs in a worker
thread, so a slow one does not hold up the others. stdout carries protocol lines only: the
host keeps the real stdout to itself and points ``sys.stdout`` at stderr, so a stray
``print()`` in a plugin lands in meithd's log instead of corrupting the protocol.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import os
import select
import sys
import threading
import traceback
from typing import Any, AsyncIterator, Callable, Iterable

#: Longest request line read (a text payload is bounded by meithd's max_frame_bytes, 8 MiB).
MAX_LINE_BYTES = 64 * 1024 * 1024


class ToolError(Exception):
    """An expected failure of a tool: the call answers ``{"success": false, "error": str(e)}``."""


class HostError(Exception):
    """Sent as an ``ok:false`` answer with ``type`` as its wire type (no stack)."""

    def __init__(self, type_: str, detail: str):
        super().__init__(detail)
        self.type = type_


class ToolPlugin:
    """The plugin interface (the tool-plugin guide's ``ToolPlugin``), with defaults.

    Override what the plugin does; every method may be ``async``. The optional methods
    (``format_tool_call_preview``, ``format_tool_result``, ``to_display_format``,
    ``get_config_schema``, ``get_ui_elements``, ``get_tags``, ``required_tags``,
    ``stream_tool``) exist on the host only when some plugin overrides them, so meithd
    learns that the others are absent and uses its defaults without asking.
    """

    #: The plugin's name: its key in the host's state, and in log lines.
    name = "plugin"
    version = "0.0.0"

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        """Returns the plugin's initial state (JSON-like). ``config`` is the source's table."""
        return {}

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """OpenAI-style ``{"type":"function","function":{…}}`` schemas, or
        ``{"type":"custom","name","description","format"}`` for text-payload tools. A schema
        may carry meith's ``"capabilities"`` (e.g. ``["read-only"]``) and ``"timeoutMs"``."""
        return []

    def execute_tool(self, tool_name: str, payload: Any, state: dict[str, Any], *,
                     payload_kind: str | None = None, **_: Any) -> dict[str, Any]:
        """Runs a tool: ``payload`` is the arguments object, or the string of a text-payload
        tool (``payload_kind == "text"``). Returns ``{"success": True, "result": …}`` or
        ``{"success": False, "error": "…"}``; a ``"state"`` key replaces the plugin's state."""
        return {"success": False, "error": f"Unknown tool: {tool_name}"}


_OPTIONAL = ("format_tool_call_preview", "format_tool_result", "to_display_format",
             "get_config_schema", "get_ui_elements", "get_tags", "required_tags")


@functools.lru_cache(maxsize=None)
def _type_overrides(cls: type, method: str) -> bool:
    impl = getattr(cls, method, None)
    return impl is not None and impl is not getattr(ToolPlugin, method, None)


def _overrides(plugin: Any, method: str) -> bool:
    """Whether the plugin's class defines ``method`` itself (asked per call: cached per class)."""
    return _type_overrides(type(plugin), method)


def _key(plugin: Any, index: int, taken: set[str]) -> str:
    key = str(getattr(plugin, "name", "") or type(plugin).__name__)
    if key in taken:
        key = f"{key}#{index}"
    taken.add(key)
    return key


_current: contextvars.ContextVar["_Context | None"] = contextvars.ContextVar("meith_tools_request",
                                                                         default=None)


def cancelled() -> bool:
    """True once meithd cancelled the request this code runs for (its caller cancelled, timed
    out or went away; docs/protocol.md §16) or the host is shutting down. A synchronous
    plugin, which runs in a worker thread that cannot be interrupted, polls it between steps
    and returns early; an async plugin gets asyncio.CancelledError at its next await instead."""
    ctx = _current.get()
    return ctx is not None and ctx.cancelled.is_set()


def _log(text: str) -> None:
    sys.stderr.write(f"[meith_tools {os.getpid()}] {text}\n")
    sys.stderr.flush()


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Calls a plugin method: awaited when async, else in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


_accepts_seen: dict[tuple[Any, str], bool] = {}


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword ``name``; inspect.signature is slow, so the answer is kept
    per function (a bound method's underlying function) for every later call."""
    key = (getattr(fn, "__func__", fn), name)
    try:
        return _accepts_seen[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable callable: asked every time
        key = None
    try:
        params = inspect.signature(fn).parameters
        answer = name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                       for p in params.values())
    except (TypeError, ValueError):
        answer = False
    if key is not None:
        _accepts_seen[key] = answer
    return answer


class _Host:
    """The methods meithd calls, over a list of plugins."""

    def __init__(self, plugins: Iterable[Any]):
        taken: set[str] = set()
        self.plugins = [(_key(p, i, taken), p) for i, p in enumerate(plugins)]
        if not self.plugins:
            raise ValueError("no plugins to serve")
        self.by_tool: dict[str, tuple[str, Any]] = {}
        self.config: dict[str, Any] = {}

    # The wire methods. Each returns (value, state).

    def methods(self) -> dict[str, Callable[[dict[str, Any], "_Context"], Any]]:
        m: dict[str, Callable[[dict[str, Any], _Context], Any]] = {
            "init": self.init,
            "get_tool_schemas": self.get_tool_schemas,
            "execute_tool": self.execute_tool,
        }
        for name in _OPTIONAL:
            if any(_overrides(p, name) for _, p in self.plugins):
                m[name] = getattr(self, name)
        return m

    async def init(self, params: dict[str, Any], ctx: "_Context"):
        config = params.get("config") or {}
        if not isinstance(config, dict):
            raise HostError("InvalidParams", "config must be an object")
        self.config = config
        state = {}
        for key, plugin in self.plugins:
            st = await _call(plugin.init, config)
            state[key] = st if st is not None else {}
        return {"ready": True, "plugins": [k for k, _ in self.plugins]}, state

    async def get_tool_schemas(self, params: dict[str, Any], ctx: "_Context"):
        state = params.get("state") or {}
        schemas: list[dict[str, Any]] = []
        self.by_tool = {}
        for key, plugin in self.plugins:
            for schema in await _call(plugin.get_tool_schemas, state.get(key, {})) or []:
                fn = schema.get("function") if isinstance(schema.get("function"), dict) else schema
                name = fn.get("name")
                if not isinstance(name, str) or not name:
                    _log(f"{key}: a schema without a name was skipped")
                    continue
                if name in self.by_tool:
                    _log(f"{key}: tool {name!r} is offered by {self.by_tool[name][0]} already; skipped")
                    continue
                self.by_tool[name] = (key, plugin)
                schemas.append(schema)
        return schemas, state

    def _owner(self, tool_name: Any):
        if not isinstance(tool_name, str) or tool_name not in self.by_tool:
            return None
        return self.by_tool[tool_name]

    @staticmethod
    def _payload(params: dict[str, Any]) -> tuple[Any, str | None]:
        if params.get("payload_kind") == "text":
            return params.get("payload", ""), "text"
        return params.get("arguments") or {}, None

    async def execute_tool(self, params: dict[str, Any], ctx: "_Context"):
        state = dict(params.get("state") or {})
        owner = self._owner(params.get("tool_name"))
        if owner is None:
            return {"success": False, "error": f"Unknown tool: {params.get('tool_name')}"}, state
        key, plugin = owner
        payload, kind = self._payload(params)
        kwargs = {"payload_kind": kind} if _accepts(plugin.execute_tool, "payload_kind") else {}
        try:
            if _overrides(plugin, "stream_tool"):
                result = await self._stream(plugin, params["tool_name"], payload, state.get(key, {}),
                                            kind, ctx)
            else:
                result = await _call(plugin.execute_tool, params["tool_name"], payload,
                                     state.get(key, {}), **kwargs)
        except ToolError as e:
            return {"success": False, "error": str(e)}, state
        if not isinstance(result, dict) or "success" not in result:
            result = {"success": True, "result": result}
        if "state" in result:
            result = dict(result)
            state[key] = result.pop("state")
        return result, state

    async def _stream(self, plugin: Any, tool_name: str, payload: Any, state: dict[str, Any],
                      kind: str | None, ctx: "_Context") -> Any:
        """stream_tool: a dict with "success" is the result, one with "part" a part event,
        anything else is sent as a part (the guide's rules)."""
        fn = plugin.stream_tool
        kwargs = {"payload_kind": kind} if _accepts(fn, "payload_kind") else {}
        final: Any = None

        def take(chunk: Any) -> bool:
            nonlocal final
            if isinstance(chunk, dict) and "success" in chunk:
                final = chunk
                return True
            ctx.emit(chunk["part"] if isinstance(chunk, dict) and "part" in chunk else chunk)
            return False

        if inspect.isasyncgenfunction(fn):
            async for chunk in fn(tool_name, payload, state, **kwargs):
                if take(chunk):
                    break
            return final if final is not None else {"success": True, "result": None}

        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        errors: list[BaseException] = []

        def run() -> None:
            try:
                for chunk in fn(tool_name, payload, state, **kwargs):
                    if ctx.cancelled.is_set():
                        break
                    loop.call_soon_threadsafe(take, chunk)
                    if isinstance(chunk, dict) and "success" in chunk:
                        break
            except BaseException as e:  # raised on the loop below
                errors.append(e)
            finally:
                # After the error is recorded and every take() is queued: the loop runs them
                # in order, so when `done` is set the result is known.
                loop.call_soon_threadsafe(done.set)

        guarded = run

        # In a copy of this task's context: cancelled() works in the generator too.
        threading.Thread(target=contextvars.copy_context().run, args=(guarded,), daemon=True).start()
        await done.wait()
        await asyncio.sleep(0)  # the last take() scheduled before done.set() has run
        if errors:
            raise errors[0]
        return final if final is not None else {"success": True, "result": None}

    # Optional methods: the plugin owning the tool when the request names one, else the first
    # plugin that has the method (docs/protocol.md §13).

    def _first_with(self, method: str):
        for key, plugin in self.plugins:
            if _overrides(plugin, method):
                return key, plugin
        raise HostError("MethodNotFound", f"no plugin has {method}")

    async def format_tool_call_preview(self, params: dict[str, Any], ctx: "_Context"):
        state = params.get("state") or {}
        owner = self._owner(params.get("tool_name"))
        if owner is None or not _overrides(owner[1], "format_tool_call_preview"):
            raise HostError("NoPreview", "no preview for this tool")
        key, plugin = owner
        payload = params.get("payload", params.get("arguments"))
        text = await _call(plugin.format_tool_call_preview, params["tool_name"], payload,
                           state.get(key, {}))
        if not isinstance(text, str) or text == "":
            raise HostError("NoPreview", "the plugin gave no preview")  # meithd's default then
        return text, state

    def _for_tool(self, params: dict[str, Any], method: str):
        """The plugin owning params' tool_name (meithd sends it) when it has `method`, else the
        first plugin that has it."""
        owner = self._owner(params.get("tool_name"))
        if owner is not None and _overrides(owner[1], method):
            return owner
        return self._first_with(method)

    async def format_tool_result(self, params: dict[str, Any], ctx: "_Context"):
        state = params.get("state") or {}
        key, plugin = self._for_tool(params, "format_tool_result")
        return await _call(plugin.format_tool_result, params.get("result") or {},
                           state.get(key, {})), state

    async def to_display_format(self, params: dict[str, Any], ctx: "_Context"):
        state = params.get("state") or {}
        key, plugin = self._for_tool(params, "to_display_format")
        return await _call(plugin.to_display_format, params.get("text", ""),
                           params.get("result") or {}, state.get(key, {})), state

    async def get_config_schema(self, params: dict[str, Any], ctx: "_Context"):
        schemas = [await _call(p.get_config_schema) for _, p in self.plugins
                   if _overrides(p, "get_config_schema")]
        schemas = [s for s in schemas if isinstance(s, dict)]
        return (schemas[0] if len(schemas) == 1 else {"allOf": schemas}), params.get("state")

    async def get_ui_elements(self, params: dict[str, Any], ctx: "_Context"):
        out: list[Any] = []
        for _, p in self.plugins:
            if _overrides(p, "get_ui_elements"):
                out.extend(await _call(p.get_ui_elements) or [])
        return out, params.get("state")

    async def get_tags(self, params: dict[str, Any], ctx: "_Context"):
        tags: list[str] = []
        for _, p in self.plugins:
            if _overrides(p, "get_tags"):
                for t in await _call(p.get_tags, params.get("config") or self.config,
                                     params.get("models") or []) or []:
                    if t not in tags:
                        tags.append(t)
        return tags, params.get("state")

    async def required_tags(self, params: dict[str, Any], ctx: "_Context"):
        tags: list[str] = []
        for _, p in self.plugins:
            if _overrides(p, "required_tags"):
                for t in await _call(p.required_tags) or []:
                    if t not in tags:
                        tags.append(t)
        return tags, params.get("state")


class _Context:
    """Per request: streams events until the answer is sent."""

    def __init__(self, request_id: str, write: Callable[[dict[str, Any]], None]):
        self.id = request_id
        self._write = write
        self.done = False
        self.cancelled = threading.Event()
        self.reason: str | None = None  # cancelled | timeout | disconnected | shutdown

    def event(self, event: dict[str, Any]) -> None:
        if not self.done:
            self._write({"v": 1, "id": self.id, "event": event})

    def emit(self, payload: Any) -> None:
        self.event({"type": "part", "payload": payload})


async def serve(methods: dict[str, Callable[..., Any]], *, eof_grace_s: float = 1.0,
                stdin=None, stdout_fd: int | None = None) -> None:
    """Serves ``methods`` (name -> ``async (params, ctx) -> (value, state)``) until stdin ends,
    then gives requests in flight ``eof_grace_s`` to answer."""
    loop = asyncio.get_running_loop()
    out_fd = stdout_fd if stdout_fd is not None else sys.stdout.fileno()
    write_lock = threading.Lock()

    def encode(obj: dict[str, Any]) -> bytes:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def write(obj: dict[str, Any]) -> None:
        write_bytes(encode(obj))

    def write_bytes(data: bytes) -> None:
        with write_lock:
            view = memoryview(data)
            while view:
                try:
                    n = os.write(out_fd, view)
                except BlockingIOError:  # a non-blocking stdout that is full: wait, do not spin
                    select.select([], [out_fd], [])
                    continue
                except OSError:  # meithd went away
                    os._exit(0)
                view = view[n:]

    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 stdin if stdin is not None else sys.stdin)
    in_flight: dict[str, tuple[asyncio.Task, _Context]] = {}

    async def handle(request_id: str, method: str, params: dict[str, Any], ctx: _Context) -> None:
        _current.set(ctx)  # cancelled() in the plugin, also from its worker thread
        try:
            value, state = await methods[method](params, ctx)
            result: dict[str, Any] = {"value": value}
            if state is not None:
                result["state"] = state
            elif "state" in params:
                result["state"] = params["state"]
            # Encoded once, here: something that cannot be sent is an error too.
            data = encode({"v": 1, "id": request_id, "ok": True, "result": result})
            line = None
        except HostError as e:
            line = {"ok": False, "error": {"type": e.type, "detail": str(e), "stack": ""}}
        except asyncio.CancelledError:
            line = {"ok": False, "error": {"type": "ShuttingDown", "detail": "the host is shutting down", "stack": ""}}
        except Exception as e:  # a bug in a plugin: its type, message and stack
            _log(f"{method} {request_id} failed: {traceback.format_exc()}")
            line = {"ok": False, "error": {"type": type(e).__name__, "detail": str(e),
                                           "stack": traceback.format_exc()}}
        answered_already = ctx.done  # a cancelled request: meithd has forgotten its id
        ctx.done = True
        if not answered_already:
            write_bytes(data if line is None else encode({"v": 1, "id": request_id, **line}))

    while True:
        try:
            raw = await reader.readline()
        except ValueError:  # a line over MAX_LINE_BYTES: skip to its end
            _log("a request line over the limit was dropped")
            continue
        if not raw:
            break
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            msg = json.loads(text)
        except json.JSONDecodeError:
            _log(f"ignoring a line that is not JSON: {text[:120]!r}")
            continue
        if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
            _log("ignoring a request without a string id")
            continue
        request_id, method = msg["id"], msg.get("method")
        if request_id in in_flight:
            _log(f"ignoring request {request_id!r}: that id is already in flight")
            continue
        if msg.get("v") != 1:
            write({"v": 1, "id": request_id, "ok": False, "error": {
                "type": "UnsupportedVersion", "detail": f"protocol version {msg.get('v')!r} is not supported", "stack": ""}})
            continue
        if method == "cancel" and "cancel" not in methods:
            # docs/protocol.md §16: stop execute_tool request params.id (its caller cancelled,
            # timed out or went away). An async plugin gets CancelledError at its next await;
            # a sync one sees cancelled() turn true; its answer is not sent.
            params = msg.get("params") or {}
            target = in_flight.get(params.get("id")) if isinstance(params, dict) else None
            if target is not None:
                task, tctx = target
                tctx.reason = str(params.get("reason") or "cancelled")
                tctx.done = True
                tctx.cancelled.set()
                task.cancel()
            write({"v": 1, "id": request_id, "ok": True,
                   "result": {"value": {"cancelled": target is not None}}})
            continue
        if not isinstance(method, str) or method not in methods:
            write({"v": 1, "id": request_id, "ok": False, "error": {
                "type": "MethodNotFound", "detail": f"unknown method {method!r}", "stack": ""}})
            continue
        params = msg.get("params") or {}
        if not isinstance(params, dict):
            write({"v": 1, "id": request_id, "ok": False, "error": {
                "type": "InvalidParams", "detail": "params must be an object", "stack": ""}})
            continue
        ctx = _Context(request_id, write)
        task = asyncio.create_task(handle(request_id, method, params, ctx))
        in_flight[request_id] = (task, ctx)
        task.add_done_callback(lambda _t, rid=request_id: in_flight.pop(rid, None))

    # stdin ended: meithd is stopping us. Let calls in flight finish briefly, then go.
    if in_flight:
        _, pending = await asyncio.wait([t for t, _ in in_flight.values()], timeout=eof_grace_s)
        for task in pending:
            task.cancel()
        for _, ctx in in_flight.values():
            ctx.cancelled.set()


def run_plugins(plugins: Iterable[Any]) -> int:
    """Serves the plugins on stdin/stdout until stdin ends; returns the exit status (0)."""
    out_fd = os.dup(sys.stdout.fileno())  # the protocol's own copy of stdout
    sys.stdout = sys.stderr  # print() in a plugin goes to meithd's log, not the protocol
    host = _Host(plugins)
    try:
        asyncio.run(serve(host.methods(), stdout_fd=out_fd))
    except KeyboardInterrupt:
        pass
    return 0


__all__ = ["ToolPlugin", "ToolError", "HostError", "cancelled", "run_plugins", "serve", "MAX_LINE_BYTES"]
_ = AsyncIterator  # re-exported type for plugin authors' annotations
