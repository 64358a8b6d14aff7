"""A blocking wrapper over the asyncio client, for scripts without an event loop: one
background thread runs the loop; each method waits for its coroutine there."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .client import Client, ToolResult


class SyncClient:
    """``with meith.SyncClient() as c: c.call("echo", {"x": 1})``."""

    def __init__(self, *, home=None, socket=None, caller: str = "plugin",
                 name: str = "meith-python-sync", timeout: float | None = None):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="meith-client")
        self._thread.start()
        self._timeout = timeout
        self._client = Client(home=home, socket=socket, caller=caller, name=name)
        self._run(self._client._ensure())

    def _run(self, coro) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(self._timeout)
        except TimeoutError:
            future.cancel()  # cancels the call, which sends cancel_tool_call
            raise

    @property
    def hello(self) -> dict | None:
        return self._client.hello

    def list_tools(self, format: str = "meith", **kw: Any) -> list[dict]:
        return self._run(self._client.list_tools(format, **kw))

    def preview(self, tool: str, arguments: Any = None) -> dict:
        return self._run(self._client.preview(tool, arguments))

    def call(self, tool: str, arguments: Any = None, **kw: Any) -> ToolResult:
        return self._run(self._client.call(tool, arguments, **kw))

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
