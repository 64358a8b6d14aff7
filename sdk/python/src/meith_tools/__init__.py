"""meith_tools: run Python tool plugins as a meith tool host.

A tool host is a subprocess meithd starts and talks to over stdin/stdout, one JSON object per
line (docs/protocol.md §7 and §13). Write a class with the plugin interface, then point a
``[[sources]]`` entry at it::

    [[sources]]
    name = "py"
    kind = "host"
    command = ["python3", "-m", "meith_tools", "my_tools:EchoTool"]

Standard library only.
"""

from .host import HostError, ToolError, ToolPlugin, cancelled, run_plugins, serve

__all__ = ["ToolPlugin", "ToolError", "HostError", "cancelled", "run_plugins", "serve"]
__version__ = "0.1.0"
