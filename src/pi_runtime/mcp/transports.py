"""The SDK client for an `MCPServer`: a stdio subprocess or a Streamable HTTP endpoint.

`${VAR}` references are resolved here, when a session opens, and nowhere else. The SDK
is imported here too, so reading an agent file never needs it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from .config import MCPServer
from .malformed import quiet_sdk_parse_log

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT

INSTALL_HINT = "MCP tools need the mcp package: pip install 'pi-runtime[mcp]'"


class ServerUnavailable(Exception):
    """The server could not be started, reached or listed; the message says why."""


def client_for(server: MCPServer, on_stdio_message: MessageHandlerFnT | None = None) -> Client:
    """An unopened SDK client for `server` (its `${VAR}` references resolved now).

    `on_stdio_message` gets a stdio server's notifications and the lines of its stdout
    the SDK could not parse (as exceptions).
    """
    try:
        from mcp import Client, StdioServerParameters
    except ImportError as exc:
        raise ServerUnavailable(f"{INSTALL_HINT} ({exc})") from None
    try:
        if server.command is not None:
            program, args = server.program()
            params = StdioServerParameters(
                command=program, args=args, env=server.resolved_env() or None, cwd=server.cwd
            )
            from mcp.client.stdio import stdio_client

            quiet_sdk_parse_log()
            transport = stdio_client(params, errlog=_errlog())
            return Client(transport, cache=None, message_handler=on_stdio_message)
        return Client(_http_transport(server), cache=None)
    except UserError as exc:  # a `${VAR}` that is not set
        raise ServerUnavailable(str(exc)) from None


def _http_transport(server: MCPServer) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, create_mcp_http_client

    # a read timeout however long a call may run, so a silent server cannot hold a
    # stream open forever
    read = max(MCP_DEFAULT_SSE_READ_TIMEOUT, server.timeout_s + 30)
    url = server.resolved_url()
    http = create_mcp_http_client(
        headers=server.resolved_headers() or None,
        timeout=httpx2.Timeout(server.connect_timeout_s, read=read),
    )

    @contextlib.asynccontextmanager
    async def transport() -> Any:
        async with http, streamable_http_client(url, http_client=http) as pair:
            yield pair

    return transport()


def _errlog() -> Any:
    """Where a stdio server's stderr goes: Pi's own, or nowhere when Pi's is no real file
    (a captured stream has no descriptor to hand a child)."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
