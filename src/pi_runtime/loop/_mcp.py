"""How an agent's run uses its MCP servers (`pi_runtime.mcp`): kept out of `agent.py`.

The servers' tools are listed at the first run (one session per server, kept until
`Agent.aclose`) and join the agent's own in the run's gate, allowed whatever the agent's
`allow` says (each server has its own `allow` and `block`). A server that cannot be
started or listed ends the run at once, well-formed, with stop reason `tool_error`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import replace

from ..exceptions import DependencyUnavailable
from ..mcp import MCPServer, MCPTools, ServerUnavailable
from ..mcp.transports import INSTALL_HINT
from ..messages import redact, repair_text
from ..tools import ToolSpec
from .state import RunState


def mcp_tools_of(servers: Iterable[MCPServer]) -> MCPTools:
    """The `MCPTools` of an agent given `servers` (DependencyUnavailable without the SDK)."""
    tools = MCPTools(servers)
    if tools and importlib.util.find_spec("mcp") is None:
        raise DependencyUnavailable(INSTALL_HINT)
    return tools


async def listed(mcp: MCPTools, taken: Iterable[str]) -> tuple[tuple[ToolSpec, ...], str | None]:
    """(the servers' tools, None), or ((), why) when they cannot be had. The reason may
    quote what a server listed (its tool names): it is repaired and redacted here."""
    if not mcp:
        return (), None
    try:
        return await mcp.specs(taken=frozenset(taken)), None
    except ServerUnavailable as exc:
        return (), redact(repair_text(str(exc)))


def allowed_with_mcp(
    allow: frozenset[str] | None, specs: tuple[ToolSpec, ...]
) -> frozenset[str] | None:
    return allow if allow is None or not specs else allow | {s.name for s in specs}


def unavailable(state: RunState, detail: str) -> RunState:
    """The run ended before its first step: the request stays in the conversation."""
    return replace(
        state,
        phase="done",
        stop_reason="tool_error",
        error=detail,
        messages=(*state.messages, *state.pending),
        pending=(),
    )
