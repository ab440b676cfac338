"""The `subagents` key of an `AgentDefinition`: each entry's shape, and how far they nest.

A definition holds each sub-agent's definition read in whole, so every worker builds the
same child. That makes nesting costly: a file that names the next one twice doubles what
is stored at each level, and each level is a call deeper when the agent is built. So
sub-agents may nest `MAX_SUBAGENT_DEPTH` levels, and one definition may include at most
`MAX_SUBAGENTS` others, theirs counted (a child named twice counts twice: it is stored
twice).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..exceptions import UserError

MAX_SUBAGENT_DEPTH = 8
MAX_SUBAGENTS = 64

_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_SUBAGENT_KEYS = {"agent", "description", "keep_history"}


def subagents_rule(key: str, value: Any) -> dict[str, dict[str, Any]]:
    """`{NAME: {"agent": <definition table>, "description": str, "keep_history": bool}}`,
    each child definition checked (and stored) as its `to_dict`. A child given as an
    `AgentDefinition` (an agent file's, just read) was checked when it was made."""
    from .definition import AgentDefinition, DefinitionError  # it imports this module

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table of sub-agents by name, got {value!r}")
    problem = _nesting_problem(value)
    if problem is not None:
        raise DefinitionError(key, problem)
    out: dict[str, dict[str, Any]] = {}
    for name, entry in value.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise DefinitionError(
                where, "a sub-agent's name is its tool name: 1-64 letters, digits, _ . or -"
            )
        if not isinstance(entry, Mapping):
            raise DefinitionError(
                where, f"must be a table with `agent` and `description`, got {entry!r}"
            )
        unknown = sorted(set(entry) - _SUBAGENT_KEYS)
        if unknown:
            raise DefinitionError(
                f"{where}.{unknown[0]}", f"unknown key; known: {sorted(_SUBAGENT_KEYS)}"
            )
        description = entry.get("description")
        if not isinstance(description, str) or not description.strip():
            raise DefinitionError(
                f"{where}.description",
                "must say what the sub-agent does: the parent's model reads it",
            )
        keep = entry.get("keep_history", False)
        if not isinstance(keep, bool):
            raise DefinitionError(f"{where}.keep_history", f"must be true or false, got {keep!r}")
        child = entry.get("agent")
        if isinstance(child, AgentDefinition):
            stored = child.to_dict()
        elif not isinstance(child, Mapping):
            raise DefinitionError(f"{where}.agent", "must name another agent file")
        else:
            try:
                stored = AgentDefinition.from_dict(child).to_dict()
            except DefinitionError as exc:
                raise DefinitionError(f"{where}.agent", f"{exc.key}: {exc.problem}") from None
            except UserError as exc:
                raise DefinitionError(f"{where}.agent", str(exc)) from None
        out[name] = {"agent": stored, "description": description.strip(), "keep_history": keep}
    return out


def _nesting_problem(tables: Mapping[str, Any]) -> str | None:
    """What is too much about sub-agents `tables` and theirs (None: nothing). Walked
    without recursion, and given up at the first definition past a limit: a table
    nested thousands deep, or doubling at each level, is refused at once."""
    count = 0
    pending: list[tuple[Any, int]] = [(tables, 1)]
    while pending:
        level, depth = pending.pop()
        if not isinstance(level, Mapping):
            continue  # the rule of that level says what is wrong
        for entry in level.values():
            child = entry.get("agent") if isinstance(entry, Mapping) else None
            if child is None:
                continue
            count += 1
            if depth > MAX_SUBAGENT_DEPTH:
                return f"sub-agents nest more than {MAX_SUBAGENT_DEPTH} levels deep"
            if count > MAX_SUBAGENTS:
                return (
                    f"includes more than {MAX_SUBAGENTS} sub-agents, theirs counted (one "
                    "named twice is stored twice): name fewer"
                )
            inner = (
                child.get("subagents")
                if isinstance(child, Mapping)
                else getattr(child, "subagents", None)
            )
            pending.append((inner, depth + 1))
    return None
