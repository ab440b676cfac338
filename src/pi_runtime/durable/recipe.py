"""A session's recipe: the `AgentDefinition` it stores, so any worker rebuilds its agent.

Stored as the session's `agent` JSON (`AgentDefinition.to_dict`): the model spec, tools as
`MODULE:ATTR` strings and where they import from, the allow-list, instructions, output
contract, limits, budget, retrieval and tool choice. Sessions stored before the
definition grew these keys hold a subset of them and still load.

    {"model": "scripted:/abs/script.json", "tools": ["examples.jobs.tools:TOOLS"],
     "allow": ["get_weather"], "limits": {"max_steps": 20}, "import_path": "/abs/dir", …}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..exceptions import UserError
from ..loop.definition import DEFAULT_JOB_ATTEMPTS, AgentDefinition, definition_here
from ..tools import ToolSpec
from ..tools.loading import load_tools

Recipe = AgentDefinition
"""What a session stores to rebuild its agent: its `AgentDefinition`."""

__all__ = ["DEFAULT_JOB_ATTEMPTS", "Recipe", "definition_here", "import_tools", "stored_recipe"]


def stored_recipe(data: Mapping[str, Any] | None) -> AgentDefinition:
    """The definition a session stored (UserError if it has none or it is malformed)."""
    if data is None:
        raise UserError("the session has no agent recipe: it was not made by `pi run`")
    try:
        return AgentDefinition.from_dict(data)
    except UserError as exc:
        raise UserError(f"the session's agent recipe is malformed: {exc}") from None


def import_tools(ref: str, import_path: str | None = None) -> list[ToolSpec]:
    """The tool or list of tools at `MODULE:ATTR` (see `pi_runtime.tools.loading`)."""
    return load_tools(ref, import_path)
