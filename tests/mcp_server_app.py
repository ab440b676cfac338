"""A small MCP server the MCP tests start for real, over stdio or Streamable HTTP.

    python mcp_server_app.py --state DIR               # stdio
    python mcp_server_app.py --state DIR --http-fd FD  # HTTP on an inherited listening socket

Built on the SDK's low-level `Server`, so the tests control every schema. It writes what
the tests check into DIR: `pid` (its process id, to kill it mid-call), `calls` (one line
per tool call it received, across restarts) and `handshakes` (one line per session
opened: `server/discover` or `initialize`).

Tools: `add` (read-only), `echo`, `stall` (sleeps), `increment` (a counter of this
process: a stateful server), `image`, `fail` (isError), `secret_env` (reads an env
variable), `wide` (a schema with a nested object), `regex` (a pattern Python cannot
compile: unusable), `remote` (a remote `$ref`: unusable).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

STATE: Path
COUNTER = {"n": 0}


def note(name: str, line: str) -> None:
    with (STATE / name).open("a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()


def obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS = [
    types.Tool(
        name="add",
        description="Add two integers.",
        input_schema=obj(
            {"a": {"type": "integer", "title": "A"}, "b": {"type": "integer"}}, ["a", "b"]
        ),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="echo",
        description="Echo text.",
        input_schema=obj({"text": {"type": "string"}}, ["text"]),
    ),
    types.Tool(
        name="stall",
        description="Sleep, then answer.",
        input_schema=obj({"seconds": {"type": "number"}}, ["seconds"]),
    ),
    types.Tool(name="increment", description="Count up.", input_schema=obj({}, [])),
    types.Tool(name="image", description="A picture.", input_schema=obj({}, [])),
    types.Tool(name="fail", description="Always fails.", input_schema=obj({}, [])),
    types.Tool(
        name="secret_env",
        description="Whether an env variable is set.",
        input_schema=obj({"name": {"type": "string"}}, ["name"]),
    ),
    types.Tool(
        name="wide",
        description="Nested arguments.",
        input_schema=obj(
            {
                "filter": obj({"city": {"type": "string"}}, ["city"]),
                "extra": {"type": "object"},
            },
            ["filter"],
        ),
        annotations=types.ToolAnnotations(idempotent_hint=True),
    ),
    types.Tool(
        name="regex",
        description="Unusable: a pattern Python cannot compile.",
        input_schema=obj({"s": {"type": "string", "pattern": "\\p{L}+"}}, ["s"]),
    ),
    types.Tool(
        name="remote",
        description="Unusable: a remote $ref.",
        input_schema=obj({"s": {"$ref": "https://example.invalid/s.json"}}, ["s"]),
    ),
]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    meta = dict(params.meta or {})
    note("calls", f"{params.name} {meta.get('pi-runtime/idempotency-key', '-')}")
    if params.name == "add":
        total = args["a"] + args["b"]
        return types.CallToolResult(
            content=[types.TextContent(text=str(total))], structured_content={"sum": total}
        )
    if params.name == "echo":
        return types.CallToolResult(content=[types.TextContent(text=args["text"])])
    if params.name == "stall":
        await asyncio.sleep(float(args["seconds"]))
        return types.CallToolResult(content=[types.TextContent(text="awake")])
    if params.name == "increment":
        COUNTER["n"] += 1
        return types.CallToolResult(
            content=[types.TextContent(text=f"{COUNTER['n']} in process {os.getpid()}")]
        )
    if params.name == "image":
        data = base64.b64encode(b"\x89PNG" + bytes(1020)).decode()
        return types.CallToolResult(
            content=[
                types.TextContent(text="here it is"),
                types.ImageContent(data=data, mime_type="image/png"),
            ]
        )
    if params.name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(text="the disk is full")], is_error=True
        )
    if params.name == "secret_env":
        value = os.environ.get(args["name"])
        return types.CallToolResult(content=[types.TextContent(text=f"length {len(value or '')}")])
    if params.name == "wide":
        return types.CallToolResult(
            content=[types.TextContent(text=f"city {args['filter']['city']}")]
        )
    return types.CallToolResult(content=[types.TextContent(text="?")], is_error=True)


def server() -> Server[Any]:
    return Server("pi-test", on_list_tools=list_tools, on_call_tool=call_tool)


def count_handshakes(app: Any) -> Any:
    """ASGI middleware: one `handshakes` line per session-opening request."""

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers") or [])
            method = headers.get(b"mcp-method", b"").decode()
            if method in ("server/discover", "initialize"):
                note("handshakes", method)
        await app(scope, receive, send)

    return counted


async def stdio() -> None:
    from mcp.server.stdio import stdio_server

    made = server()
    async with stdio_server() as (read, write):
        note("handshakes", "stdio")
        await made.run(read, write, made.create_initialization_options())


async def http(fd: int) -> None:
    import uvicorn

    sock = socket.socket(fileno=fd)
    app = count_handshakes(server().streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    global STATE
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--http-fd", type=int)
    options = parser.parse_args()
    STATE = Path(options.state)
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "pid").write_text(str(os.getpid()), encoding="utf-8")
    if options.http_fd is None:
        asyncio.run(stdio())
    else:
        asyncio.run(http(options.http_fd))


if __name__ == "__main__":
    main()
