"""The meith client against the real daemon: call, stream, cancel, timeout, denied, unknown
tool, preview, formats, a daemon restarted under it, and the sync wrapper."""

from __future__ import annotations

import asyncio
import time

import pytest

import meith
from conftest import PERMISSIVE, host_source


async def list_sources(daemon):
    async with await meith.connect(socket=daemon.socket) as c:
        return await c.list_sources()


def run(coro):
    return asyncio.run(coro)


def test_discovery_through_config_json_and_hello(daemon):
    assert meith.locate_socket(daemon.home) == daemon.socket

    async def go():
        async with await meith.connect(home=daemon.home, name="pytest", agent="tester") as c:
            assert c.hello["type"] == "hello_result"
            assert c.hello["caller"] == "plugin"
            assert (await c.call("echo", {"x": 1})).content == {"x": 1}
    run(go())
    starts = [l for l in daemon.audit() if l["event"] == "tool_call" and l["toolName"] == "echo"]
    assert starts and starts[-1]["agent"] == "tester"


def test_not_running_is_a_clear_error(tmp_path):
    with pytest.raises(meith.NotRunning):
        run(meith.connect(socket=tmp_path / "none.sock"))


def test_typed_errors_for_the_codes(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            with pytest.raises(meith.UnknownTool):
                await c.call("no_such_tool")
            with pytest.raises(meith.ValidationError):
                await c.call("greet", {"who": 5})
            with pytest.raises(meith.Timeout):
                await c.call("slow", {"ms": 3000}, timeout_ms=200)
            with pytest.raises(meith.ProtocolError):
                await c.list_tools(format="gemini")
            # The connection is still good after all of that.
            assert (await c.call("echo", {})).ok
    run(go())


def test_denied_for_the_caller(daemon_factory):
    d = daemon_factory(host_source("py", ["plugins:Demo"]) +
                       '[[permissions.rules]]\ntool = "greet"\ncaller = "plugin"\ndecision = "deny"\n')

    async def go():
        async with await meith.connect(socket=d.socket) as c:
            with pytest.raises(meith.PermissionDenied):
                await c.call("greet", {"who": "x"})
            assert (await c.preview("greet", {"who": "x"}))["permission"] == "deny"
        async with await meith.connect(socket=d.socket, caller="cli") as c:
            assert (await c.call("greet", {"who": "x"})).ok
    run(go())


def test_cancel_by_cancelling_the_task_stops_the_call(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            task = asyncio.create_task(c.call("slow", {"ms": 5000}))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - started < 1
            assert (await c.call("echo", {"after": "cancel"})).content == {"after": "cancel"}
    run(go())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ends = [l for l in daemon.audit() if l["event"] == "tool_call" and l["toolName"] == "slow"]
        if ends:
            break
        time.sleep(0.05)
    assert ends and ends[-1]["errorCode"] == "CANCELLED"

    async def stopped():  # the cancel reached the plugin, which stopped (docs/protocol.md §16)
        async with await meith.connect(socket=daemon.socket) as c:
            for _ in range(100):
                r = (await c.call("stopped", {})).content
                if r:
                    return r
                await asyncio.sleep(0.05)
            return []
    assert run(stopped()) == ["slow 5000"]
    assert [s for s in run(list_sources(daemon)) if s["kind"] == "host"][0]["cancel"] is True


def test_formats_and_preview(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            anthropic = await c.list_tools(format="anthropic")
            assert all(set(t) == {"name", "description", "input_schema"} for t in anthropic)
            openai = await c.list_tools(format="openai")
            assert all(t["type"] == "function" for t in openai)
            p = await c.preview("greet", {"who": "di"})
            assert p == {"text": "greet <- {'who': 'di'}", "permission": "allow"}
    run(go())


def test_a_daemon_restarted_under_the_client(daemon):
    async def go():
        c = await meith.connect(socket=daemon.socket)
        assert (await c.call("echo", {"n": 1})).ok
        daemon.stop()
        with pytest.raises((meith.ConnectionLost, meith.NotRunning)):
            await c.call("echo", {"n": 2})
        daemon.start()
        # The next request connects again.
        assert (await c.call("echo", {"n": 3})).content == {"n": 3}
        await c.close()
    run(go())


def test_sync_client(daemon):
    with meith.SyncClient(socket=daemon.socket) as c:
        assert c.call("greet", {"who": "sync"}).content == "hi, sync"
        assert any(t["name"] == "greet" for t in c.list_tools())
        with pytest.raises(meith.ToolFailed):
            c.call("fail")


def test_a_slow_consumer_does_not_lose_events(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            stream = c.stream("count", {"n": 600})  # more than the client's event queue
            seen = []
            async for e in stream:
                seen.append(e["payload"]["i"])
                if len(seen) % 100 == 0:
                    await asyncio.sleep(0.05)
            assert seen == list(range(1, 601))
            assert stream.result.content == {"counted": 600}
    run(go())


def test_leaving_a_stream_with_a_full_queue_frees_the_connection(daemon):
    async def go():
        async with await meith.connect(socket=daemon.socket) as c:
            stream = c.stream("count", {"n": 3000})  # far more than the 256-event queue
            async for _ in stream:
                await asyncio.sleep(0.2)  # let the queue fill up behind us
                break
            # The reader was blocked on the full queue; leaving the stream freed it.
            r = await asyncio.wait_for(c.call("echo", {"next": 1}), 10)
            assert r.content == {"next": 1}
    run(go())
