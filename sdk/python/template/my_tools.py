"""A meith tool host in Python: copy this folder, rename, and edit.

Run by meithd (meithd.toml next to this file shows the [[sources]] entry):
    python3 -m meith_tools my_tools:MyTools
"""

from __future__ import annotations

from typing import Any

from meith_tools import ToolError, ToolPlugin


class MyTools(ToolPlugin):
    name = "my_tools"
    version = "0.1.0"

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        # `config` is the source's `config` table in meithd.toml; what you return is the
        # state meithd keeps for you and passes to every call.
        return {"unit": config.get("unit", "words")}

    def get_config_schema(self) -> dict[str, Any]:
        # meithd checks the config against it before init: a mismatch fails the source.
        return {"type": "object", "properties": {"unit": {"enum": ["words", "lines"]}},
                "additionalProperties": False}

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [{
            "type": "function",
            "function": {
                "name": "count_text",
                "description": f"Counts the {state['unit']} of a text.",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                               "required": ["text"]},
            },
            # What the tool does decides who may call it (docs/protocol.md §5).
            "capabilities": ["read-only"],
        }]

    def execute_tool(self, tool_name: str, payload: Any, state: dict[str, Any], **_: Any):
        if tool_name != "count_text":
            raise ToolError(f"unknown tool {tool_name}")
        text = payload["text"]
        n = len(text.split()) if state["unit"] == "words" else len(text.splitlines())
        return {"success": True, "result": {state["unit"]: n}}

    def format_tool_call_preview(self, tool_name, payload, state, **_) -> str:
        return f"count the {state['unit']} of {len(payload.get('text', ''))} characters"

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        if not result.get("success"):
            return f"Error: {result.get('error')}"
        return ", ".join(f"{v} {k}" for k, v in result["result"].items())
