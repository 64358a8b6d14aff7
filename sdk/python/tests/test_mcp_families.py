"""The client's MCP families (docs/protocol.md §17) against the real daemon with the npm
server-everything as a source: mcp_request answers and errors, and a server's sampling and
elicitation requests answered by the client's handlers during its call."""

from __future__ import annotations

import asyncio
import json

import pytest

import meith
from conftest import ROOT

EVERYTHING = ROOT / "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def everything(daemon_factory):
    if not EVERYTHING.exists():
        pytest.skip("skipped: the npm MCP servers are not installed (scripts/install-deps)")
    return daemon_factory(
        '[permissions.callers.plugin]\nallow = ["read-only", "accesses-network", "unknown"]\n\n'
        f'[[sources]]\nname = "everything"\nkind = "mcp"\n'
        f'command = ["node", {json.dumps(str(EVERYTHING))}, "stdio"]\nprefix = "ev_"\nsandbox = "off"\n')


def test_resources_prompts_and_errors(everything):
    async def go():
        async with await meith.connect(socket=everything.socket) as c:
            uri = "demo://resource/static/document/instructions.md"
            listed = await c.mcp_request("resources/list")
            assert uri in [r["uri"] for r in listed["resources"]]
            read = await c.mcp_request("resources/read", {"uri": uri})
            assert read["contents"][0]["uri"] == uri
            assert read["contents"][0]["text"].startswith("# Everything Server")
            got = await c.mcp_request("prompts/get", {"name": "ev_args-prompt",
                                                      "arguments": {"city": "Paris"}})
            assert got["messages"][0]["content"]["text"] == "What's weather in Paris?"
            with pytest.raises(meith.McpError) as e:
                await c.mcp_request("prompts/get", {"name": "ev_nope"})
            assert e.value.code == -32602
    asyncio.run(go())


def test_handlers_answer_the_servers_requests_during_a_call(everything):
    asked = []

    async def sample(params):
        asked.append(params)
        return {"model": "py", "role": "assistant", "stopReason": "endTurn",
                "content": {"type": "text", "text": "sampled by python"}}

    async def elicit(params):
        asked.append(params)
        return {"action": "decline"}

    async def go():
        async with await meith.connect(socket=everything.socket, handlers={
                "sampling/createMessage": sample, "elicitation/create": elicit}) as c:
            r = await c.call("ev_trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
            assert "sampled by python" in r.content["content"][0]["text"]
            r = await c.call("ev_trigger-elicitation-request", {})
            assert r.content["content"][0]["text"].startswith("❌ User declined")
        # Without handlers the server's request is refused, saying why.
        async with await meith.connect(socket=everything.socket) as c:
            with pytest.raises(meith.ToolFailed) as e:
                await c.call("ev_trigger-sampling-request", {"prompt": "hi"})
            assert "did not declare the capability" in str(e.value)
    asyncio.run(go())
    assert asked[0]["messages"][0]["content"]["text"].endswith("hi")
    assert asked[1]["requestedSchema"]["type"] == "object"
