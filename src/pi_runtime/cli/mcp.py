"""`pi mcp serve --agent FILE`: a Pi agent as an MCP server (stdio) with one tool.

The tool takes `{"task": "…"}`, runs the agent on it in a conversation of its own, and
answers with the agent's final answer: text, or for an agent with an output contract its
JSON object (as text and as `structuredContent`). A run that does not complete answers
`isError: true` naming its stop reason, so the calling model knows it has no answer.
Bad arguments are refused before a run starts. Anything a tool prints goes to stderr:
stdout is the protocol's.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..exceptions import UserError
from ._console import fail

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server import Server

    from ..loop import Agent, RunResult

log = logging.getLogger("pi_runtime.mcp")

mcp_app = typer.Typer(help="MCP: serve an agent to MCP clients.", no_args_is_help=True)

TASK_DESCRIPTION = (
    "The whole task: what to do and what to report back. The agent sees nothing else of "
    "your conversation, so include every fact it needs."
)
MAX_ERROR_CHARS = 1_000


@mcp_app.command("serve")
def serve_command(
    agent_file: Annotated[
        Path, typer.Option("--agent", help="Agent file (TOML) of the agent to serve.")
    ],
    model: Annotated[
        str | None, typer.Option("--model", help="Model spec overriding the file's.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The tool's name (default: the file's stem).")
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="What the calling model reads.")
    ] = None,
    trace_dir: Annotated[
        Path | None, typer.Option("--trace-dir", help="Where the runs' traces go.")
    ] = None,
) -> None:
    """Serve the agent over stdio as an MCP server with one tool: {"task"} → its answer."""
    import anyio

    from ..loop.agentfile import agent_error, read_agent_file
    from ..loop.definition import DefinitionError, absolute_model

    tool_name = name or re.sub(r"[^A-Za-z0-9_-]", "_", agent_file.stem)[:64] or "agent"
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", tool_name):
        fail(f"--name: 1-64 letters, digits, _ . or -, got {tool_name!r}")
    try:
        definition = read_agent_file(agent_file).with_overrides(
            model=absolute_model(model, Path.cwd())
        )
        try:
            agent = definition.build_agent(trace_dir=trace_dir)
        except DefinitionError as exc:
            raise agent_error(definition, exc) from None
        server = agent_server(agent, tool_name, description or _description(agent, tool_name))
    except UserError as exc:
        fail(exc)
    anyio.run(_serve_stdio, server, agent)


def agent_server(agent: Agent, name: str, description: str) -> Server[Any]:
    """A low-level MCP `Server` offering `agent` as the tool `name`."""
    try:
        import mcp.types as types
        from mcp.server import Server
    except ImportError:
        raise UserError(
            "pi mcp serve needs the mcp package: pip install 'pi-runtime[mcp]'"
        ) from None
    from ..messages import clipped

    schema = {
        "type": "object",
        "properties": {"task": {"type": "string", "minLength": 1, "description": TASK_DESCRIPTION}},
        "required": ["task"],
        "additionalProperties": False,
    }
    listed = types.Tool(name=name, description=description, input_schema=schema)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != name:
            return _error(f"there is no tool {params.name!r}; this server has {name!r}")
        arguments = params.arguments or {}
        task = arguments.get("task")
        extra = sorted(set(arguments) - {"task"})
        if not isinstance(task, str) or not task.strip() or extra:
            return _error(
                'arguments must be {"task": "<what to do>"}, a non-empty string and nothing '
                f"else; got keys {sorted(arguments)}"
            )
        session = f"mcp-{uuid.uuid4().hex[:16]}"
        try:
            result = await agent.run(task, session_id=session)
        except UserError as exc:
            return _error(f"the agent could not start: {clipped(str(exc), MAX_ERROR_CHARS)}")
        return _answer(result)

    return Server(name=f"pi-{name}", on_list_tools=list_tools, on_call_tool=call_tool)


def _answer(result: RunResult) -> types.CallToolResult:
    import mcp.types as types

    from ..messages import clipped

    if result.status != "completed":
        detail = f"the agent stopped with {result.stop_reason} before answering"
        if result.error:
            detail += f": {clipped(result.error, MAX_ERROR_CHARS)}"
        return _error(detail)
    output = result.output
    if isinstance(output, dict):
        text = json.dumps(output, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=output
        )
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _error(message: str) -> types.CallToolResult:
    import mcp.types as types

    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def _serve_stdio(server: Server[Any], agent: Agent) -> None:
    from mcp.server.stdio import stdio_server

    # the agent's model connections and its own MCP servers close at the end
    async with agent, stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _description(agent: Agent, name: str) -> str:
    role = agent.instructions if isinstance(agent.instructions, str) else None
    if role is None and agent.instructions is not None:
        role = getattr(agent.instructions, "role", None)
    about = f" It says of itself: {role.strip()}" if role and role.strip() else ""
    return f"Runs the Pi agent {name!r} on a task and returns its final answer.{about}"
