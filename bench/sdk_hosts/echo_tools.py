"""bench (d): the Python SDK's tool host (sdk/python, meith_tools) with one tool, `echo`
(listed as p_echo), answering its arguments ({"s": ...}) as they came.

Run by meithd as: python3 -m meith_tools echo_tools:EchoTools (cwd bench/sdk_hosts,
PYTHONPATH ../../sdk/python/src).
"""

from __future__ import annotations

from typing import Any

from meith_tools import ToolPlugin


class EchoTools(ToolPlugin):
    name = "echo_tools"
    version = "0.1.0"

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [{
            "type": "function",
            "function": {
                "name": "echo",
                "description": "Echoes its arguments",
                "parameters": {"type": "object", "properties": {"s": {"type": "string"}},
                               "required": ["s"]},
            },
            "capabilities": ["read-only"],
        }]

    def execute_tool(self, tool_name: str, payload: Any, state: dict[str, Any], **_: Any):
        return {"success": True, "result": payload}
