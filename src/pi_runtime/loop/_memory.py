"""How an agent's run uses long-term memory (`pi_runtime.memory`): checks and helpers
kept out of `agent.py`."""

from __future__ import annotations

from ..exceptions import UserError
from ..memory import Memory, MemoryRun
from ..messages import UserMessage
from .state import RunState


def check_memory(memory: Memory | None, names: list[str]) -> Memory | None:
    """`memory` if an agent with tools `names` can use it, else UserError."""
    if memory is None:
        return None
    if not isinstance(memory, Memory):
        raise UserError(f"memory must be a Memory, got {memory!r}")
    taken = sorted(set(names) & set(memory.tool_names))
    if taken:
        raise UserError(f"tool name(s) {', '.join(taken)} are memory's own: rename the tool")
    return memory


def allowed_with_memory(
    allow: frozenset[str] | None, memory: MemoryRun | None
) -> frozenset[str] | None:
    """The allow-list with memory's tools in it: an agent given memory may use it."""
    if allow is None or memory is None:
        return allow
    return allow | {spec.name for spec in memory.tools}


def request_text(state: RunState) -> str:
    """What the user asked in the request the run serves: memory is recalled against it."""
    for message in (*state.pending, *state.messages[state.anchor : state.anchor + 1]):
        if isinstance(message, UserMessage):
            return message.content
    return ""
