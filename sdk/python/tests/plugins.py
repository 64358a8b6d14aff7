"""Plugins for the SDK's tests: one synchronous, one asyncio, every method between them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from meith_tools import ToolError, ToolPlugin, cancelled

# Calls of `slow` that saw meith_tools.cancelled() turn true and returned early.
STOPPED: list[str] = []


def function(name: str, description: str, properties: dict | None = None,
             required: list | None = None, **extra: Any) -> dict:
    return {"type": "function",
            "function": {"name": name, "description": description,
                         "parameters": {"type": "object", "properties": properties or {},
                                        "required": required or []}},
            "capabilities": ["read-only"], **extra}


class Demo(ToolPlugin):
    """Synchronous: runs in worker threads."""

    name = "demo"

    def init(self, config):
        return {"greeting": config.get("greeting", "hello"), "calls": 0}

    def get_tool_schemas(self, state):
        return [
            function("greet", "Greets someone", {"who": {"type": "string"}}, ["who"]),
            {"type": "custom", "name": "shout", "description": "Upper-cases its text payload",
             "format": {"type": "text"}, "capabilities": ["read-only"]},
            function("count", "Streams 1..n", {"n": {"type": "integer"}}),
            function("fail", "Fails as a tool does"),
            function("crash", "Raises an unexpected exception"),
            function("slow", "Sleeps ms milliseconds", {"ms": {"type": "integer"}}),
            function("calls", "Counts its calls in the plugin state"),
            function("whisper", "Prints to stdout, which must not break the protocol"),
            function("stopped", "The slow calls that stopped early, cancelled"),
        ]

    def execute_tool(self, tool_name, payload, state, *, payload_kind=None, **_):
        if tool_name == "greet":
            return {"success": True, "result": f"{state['greeting']}, {payload['who']}"}
        if tool_name == "shout":
            return {"success": True, "result": {"text": payload.upper(), "kind": payload_kind}}
        if tool_name == "fail":
            raise ToolError("this tool always fails")
        if tool_name == "crash":
            raise RuntimeError("unexpected")
        if tool_name == "slow":
            # A sync tool cannot be interrupted: it polls cancelled() between short steps.
            deadline = time.monotonic() + payload.get("ms", 1000) / 1000
            while time.monotonic() < deadline:
                if cancelled():
                    STOPPED.append(f"slow {payload.get('ms', 1000)}")
                    return {"success": False, "error": "cancelled"}
                time.sleep(0.01)
            return {"success": True, "result": "slept"}
        if tool_name == "stopped":
            return {"success": True, "result": list(STOPPED)}
        if tool_name == "calls":
            n = state.get("calls", 0) + 1
            return {"success": True, "result": n, "state": {**state, "calls": n}}
        if tool_name == "whisper":
            print("a stray print from a plugin")
            return {"success": True, "result": "still fine"}
        return {"success": False, "error": f"Unknown tool: {tool_name}"}

    def stream_tool(self, tool_name, payload, state, **kw):
        if tool_name != "count":
            yield self.execute_tool(tool_name, payload, state, **kw)
            return
        n = payload.get("n", 3)
        for i in range(1, n + 1):
            yield {"part": {"i": i}}
        yield {"success": True, "result": {"counted": n}}

    def format_tool_call_preview(self, tool_name, payload, state, **_):
        return f"{tool_name} <- {payload!r}" if tool_name == "greet" else ""

    def format_tool_result(self, result, state):
        return f"RESULT {result.get('result')!r}" if result.get("success") else f"Error: {result.get('error')}"

    def to_display_format(self, text, result, state):
        return {"type": "text", "content": f"[{text}]"}

    def get_config_schema(self):
        return {"type": "object", "properties": {"greeting": {"type": "string"}}}

    def get_ui_elements(self):
        return [{"type": "text", "label": "demo"}]

    def get_tags(self, config, models):
        return ["demo"] + [f"model:{m.get('name') if isinstance(m, dict) else m}" for m in models]

    def required_tags(self):
        return []


class AsyncDemo(ToolPlugin):
    """asyncio: runs on the host's loop."""

    name = "async"

    async def init(self, config):
        return {}

    async def get_tool_schemas(self, state):
        return [function("tick", "Streams n ticks, asynchronously", {"n": {"type": "integer"}}),
                function("nap", "Sleeps ms milliseconds, asynchronously", {"ms": {"type": "integer"}})]

    async def execute_tool(self, tool_name, payload, state, **_):
        if tool_name == "nap":
            await asyncio.sleep(payload.get("ms", 100) / 1000)
            return {"success": True, "result": "napped"}
        return {"success": False, "error": f"Unknown tool: {tool_name}"}

    async def stream_tool(self, tool_name, payload, state, **kw):
        if tool_name == "tick":
            for i in range(payload.get("n", 2)):
                await asyncio.sleep(0.01)
                yield {"tick": i}
            yield {"success": True, "result": "ticked"}
            return
        yield await self.execute_tool(tool_name, payload, state, **kw)
