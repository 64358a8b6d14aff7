"""meith: call the meith daemon from Python.

::

    import asyncio, meith

    async def main():
        async with await meith.connect() as client:          # finds meithd via config.json
            tools = await client.list_tools(format="anthropic")
            result = await client.call("echo", {"hello": "world"})
            async for event in client.stream("count", {"n": 3}):
                print(event)

    asyncio.run(main())

``meith.SyncClient`` wraps the same calls for code without an event loop. Errors from a
tool's result raise ``meith.ToolCallError`` subclasses named after the eight error codes
(docs/protocol.md §4). Standard library only.
"""

from .client import (Cancelled, Client, ConnectionLost, McpError, NotRunning, PermissionDenied,
                     ProtocolError, RateLimited, RuntimeShuttingDown, Timeout, ToolCallError,
                     ToolFailed, ToolResult, UnknownTool, ValidationError, connect, locate_socket)
from .sync import SyncClient

__all__ = ["Client", "SyncClient", "ToolResult", "connect", "locate_socket", "ToolCallError",
           "UnknownTool", "ValidationError", "PermissionDenied", "Timeout", "Cancelled",
           "ToolFailed", "RuntimeShuttingDown", "ProtocolError", "RateLimited", "NotRunning",
           "ConnectionLost", "McpError"]
__version__ = "0.1.0"
