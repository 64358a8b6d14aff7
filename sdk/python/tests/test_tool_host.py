"""meith_tools under the real meithd: every method of the host protocol, through the client."""

from __future__ import annotations

import asyncio
import time

import pytest

import meith
from conftest import host_source


def run(coro):
    return asyncio.run(coro)


async def probed(client, source="py"):
    for _ in range(500):
        for s in await client.list_sources():
            if s["name"] == source and isinstance(s.get("methods"), list):
                return s
        await asyncio.sleep(0.01)
    raise AssertionError("methods never probed")


def test_schemas_object_and_text_payloads_and_state(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            tools = {t["name"]: t for t in await c.list_tools()}
            assert {"greet", "shout", "count", "tick", "nap"} <= set(tools)
            assert tools["shout"]["payloadKind"] == "text"
            assert tools["greet"]["inputSchema"]["required"] == ["who"]
            assert (await c.call("greet", {"who": "ada"})).content == "hi, ada"  # config -> init state
            shout = await c.call("shout", "quiet please\nline two")
            assert shout.content == {"text": "QUIET PLEASE\nLINE TWO", "kind": "text"}
            # The plugin's state goes round through meithd.
            assert (await c.call("calls")).content == 1
            assert (await c.call("calls")).content == 2
            # print() in a plugin lands in the log, not in the protocol.
            assert (await c.call("whisper")).content == "still fine"
    run(go())
    assert "a stray print from a plugin" in (daemon.home / "meithd.log").read_text()


def test_streaming_sync_and_async_plugins(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            stream = c.stream("count", {"n": 4})
            events = [e async for e in stream]
            assert [e["payload"]["i"] for e in events] == [1, 2, 3, 4]
            assert all(e["type"] == "part" for e in events)
            assert stream.result.content == {"counted": 4}
            ticks = c.stream("tick", {"n": 3})
            assert [e["payload"]["tick"] async for e in ticks] == [0, 1, 2]
            assert ticks.result.content == "ticked"
    run(go())


def test_errors_tool_error_and_exception(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            with pytest.raises(meith.ToolFailed) as failed:
                await c.call("fail")
            assert "this tool always fails" in failed.value.message
            crash = await c.call("crash", check=False)
            assert not crash.ok
            assert crash.error["code"] == "TOOL_FAILED"
            assert crash.error["details"]["type"] == "RuntimeError"
            assert crash.error["details"]["detail"] == "unexpected"
    run(go())


def test_many_calls_in_flight_at_once(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            started = time.monotonic()
            results = await asyncio.gather(*[c.call("slow", {"ms": 300}) for _ in range(8)],
                                           *[c.call("nap", {"ms": 300}) for _ in range(8)])
            assert all(r.content in ("slept", "napped") for r in results)
            # 16 calls of 300 ms at once: overlapping, not one after another (4.8 s).
            assert time.monotonic() - started < 3
    run(go())


def test_every_optional_method_is_mapped(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            source = await probed(c)
            assert sorted(source["methods"]) == sorted([
                "format_tool_call_preview", "format_tool_result", "to_display_format",
                "get_config_schema", "get_ui_elements", "get_tags", "required_tags"])
            assert (await c.preview("greet", {"who": "bo"}))["text"] == "greet <- {'who': 'bo'}"
            # The plugin has no preview for this tool: meithd's default.
            assert (await c.preview("calls", {}))["text"] == "calls({})"
            r = await c.call("greet", {"who": "cy"}, model=True, display=True)
            assert r.model_content == "RESULT 'hi, cy'"
            assert r.meta["display"] == {"type": "text", "content": "[RESULT 'hi, cy']"}
            tools = {t["name"]: t for t in await c.list_tools(models=[{"name": "m1"}])}
            assert tools["greet"]["tags"] == ["demo", "model:m1"]
    run(go())


def test_a_config_that_breaks_the_plugin_schema_fails_the_source(daemon_factory):
    d = daemon_factory(host_source("py", ["plugins:Demo"], config="{ greeting = 5 }"))

    async def go():
        async with await meith.connect(socket=d.socket) as c:
            source = next(s for s in await c.list_sources() if s["name"] == "py")
            assert source["state"] == "failed"
            assert "get_config_schema" in source["lastError"]
    run(go())


def test_a_host_without_optional_methods_has_none(daemon_factory):
    d = daemon_factory(host_source("bare", ["plugins:AsyncDemo"]))

    async def go():
        async with await meith.connect(socket=d.socket) as c:
            assert (await probed(c, "bare"))["methods"] == []
            assert (await c.preview("nap", {"ms": 1}))["text"] == 'nap({"ms":1})'
            assert (await c.call("nap", {"ms": 1}, model=True)).model_content == "napped"
    run(go())
