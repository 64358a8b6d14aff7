"""The tool-plugin guide's first example, served by meith's Python SDK (sdk/python).

examples/meithd.toml runs it as:
    command = ["python3", "-m", "meith_tools", "echo_tool:EchoTool"]
with this folder as the working directory; its tools get the prefix "py_".
"""

from __future__ import annotations

from typing import Any

from meith_tools import ToolPlugin


class EchoTool(ToolPlugin):
    name = "echo_tool"
    version = "0.1.0"

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config}

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [{
            "type": "function",
            "function": {
                "name": "echo",
                "description": "Echo back the provided value.",
                "parameters": {"type": "object", "properties": {"value": {"type": "string"}},
                               "required": ["value"]},
            },
            "capabilities": ["read-only"],
        }]

    def format_tool_call_preview(self, tool_name, payload, state, **_) -> str:
        if tool_name != "echo" or not isinstance(payload, dict):
            return ""
        return f"echo value={payload.get('value')!r}"

    def execute_tool(self, tool_name, payload, state, **_) -> dict[str, Any]:
        if tool_name != "echo":
            return {"success": False, "error": f"Unknown tool: {tool_name}"}
        value = payload.get("value")
        if not isinstance(value, str):
            return {"success": False, "error": "value must be a string"}
        return {"success": True, "result": value}

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        if result.get("success"):
            return str(result.get("result") or "")
        return f"Error: {result.get('error')}"
