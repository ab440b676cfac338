"""MCP tools: the tools of Model Context Protocol servers, called through Pi's gate.

`MCPServer` says where a server is (a stdio `command` or a Streamable HTTP `url`) and
which of its tools an agent may call; `MCPTools` holds one client session per server
for an agent's life and turns the tools it lists into `ToolSpec`s. The MCP SDK is
imported only when a session opens (`pip install 'pi-runtime[mcp]'`).
See docs/mcp.md.
"""

from .config import MCPServer
from .connection import Connection
from .schema import UnusableSchema, strict_schema
from .toolset import MCPTools, MCPToolSpec
from .transports import ServerUnavailable

__all__ = [
    "Connection",
    "MCPServer",
    "MCPToolSpec",
    "MCPTools",
    "ServerUnavailable",
    "UnusableSchema",
    "strict_schema",
]
