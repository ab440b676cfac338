"""The keys of an `AgentDefinition`: how each is checked, and what a stored one means.

Each key is one entry of `_RULES`: a checker that turns a raw value into the stored one
or raises `DefinitionError` naming the key. `AgentDefinition` (`pi_runtime.loop.
definition`, which re-exports the error) runs them when it is made; `_prompt_parts`,
`_contract` and `_retriever` turn a stored value back into what `build_agent` passes to
`Agent`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..context import Budget, PromptParts
from ..context.presets import check_presets
from ..contract import OutputContract
from ..exceptions import UserError
from ..guardrails import check_ref
from ..mcp import MCPServer
from ..memory import MemoryPolicy
from ..tools.loading import split_ref
from ..tools.retrieval import ToolRetriever
from ._subagent_rule import subagents_rule
from .guards import Limits
from .plan import MODES

MAX_JOB_ATTEMPTS = 1000
MAX_REPLANS = 100
MAX_STEP_STEPS = 1000  # a plan step's model calls
_RETRIEVAL_KEYS = {"threshold": int, "top_k": int, "always_include": list, "embedder": str}
_EMBEDDERS = ("auto", "bm25")


class DefinitionError(UserError):
    """A key of an agent definition is wrong; `key` is its dotted path (`limits.max_steps`)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


_SKIP_SAME = {"limits", "job_max_attempts", "source", "local"}


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A definition's stored form without what a turn or a machine may change, its
    sub-agents' included."""
    out = {k: v for k, v in data.items() if k not in _SKIP_SAME}
    out["subagents"] = {
        name: {**entry, "agent": _comparable(entry["agent"])}
        for name, entry in (data.get("subagents") or {}).items()
    }
    return out


def _blame(message: str) -> str:
    """The key an Agent constructor's complaint is about (best effort)."""
    for key, words in (
        ("guardrails", ("tool guardrails",)),
        ("allow", ("allow names",)),
        ("approval", ("approval names", "approval must")),
        ("tool_choice", ("tool_choice", "the tool choice must")),
        ("tools", ("two tools share", "@tool")),
        ("output", ("contract",)),
        ("budget", ("Budget.",)),
        ("memory", ("memory", "Memory")),
        ("mcp", ("MCP",)),
    ):
        if any(w in message for w in words):
            return key
    return "limits"


# Rules: each takes (key, raw value) and returns the stored value or raises.


def _optional_str(key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise DefinitionError(key, f"must be a non-empty string, got {value!r}")
    return value


def _names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise DefinitionError(key, f"must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise DefinitionError(key, f"must be a list of non-empty strings, got {item!r}")
    return tuple(value)


def _tools(key: str, value: Any) -> tuple[str, ...]:
    refs = _names(key, value)
    for ref in refs:
        try:
            split_ref(ref)
        except UserError as exc:
            raise DefinitionError(key, str(exc)) from None
    return refs


def _allow(key: str, value: Any) -> tuple[str, ...] | None:
    return None if value is None else _names(key, value)


def _instructions(key: str, value: Any) -> str | dict[str, Any] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a string or a table of prompt parts, got {value!r}")
    if isinstance(value.get("presets"), list):
        try:
            check_presets(value["presets"])
        except UserError as exc:
            raise DefinitionError(f"{key}.presets", str(exc)) from None
    return _dataclass_table(key, PromptParts, value)


def _output(key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("schema"), Mapping):
        raise DefinitionError(key, "must name a JSON Schema file (or a table with `schema`)")
    allowed = {"name", "schema", "strict", "max_repairs", "fallback"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise DefinitionError(f"{key}.{unknown[0]}", f"unknown key; known: {sorted(allowed)}")
    strict = value.get("strict", True)
    if not isinstance(strict, bool):
        raise DefinitionError(f"{key}.strict", f"must be true or false, got {strict!r}")
    table = {"name": "output", "strict": True, "max_repairs": 2, **value}
    try:
        _contract(table)
    except UserError as exc:
        raise DefinitionError(key, str(exc)) from None
    return table


def _limits(key: str, value: Any) -> dict[str, Any]:
    return _dataclass_table(key, Limits, value)


def _budget(key: str, value: Any) -> dict[str, Any]:
    return _dataclass_table(key, Budget, value)


def _retrieval(key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table, got {value!r}")
    for name, item in value.items():
        kind = _RETRIEVAL_KEYS.get(name)
        if kind is None:
            raise DefinitionError(f"{key}.{name}", f"unknown key; known: {sorted(_RETRIEVAL_KEYS)}")
        if not isinstance(item, kind) or isinstance(item, bool):
            raise DefinitionError(f"{key}.{name}", f"must be {kind.__name__}, got {item!r}")
    if value.get("embedder", "auto") not in _EMBEDDERS:
        raise DefinitionError(f"{key}.embedder", f"must be one of {_EMBEDDERS}")
    try:
        _retriever(dict(value))
    except UserError as exc:
        raise DefinitionError(key, str(exc)) from None
    return dict(value)


_LOCAL_MINIMA = {"threads": 1, "context": 512, "max_tokens": 1}


def _local(key: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table, got {value!r}")
    for name, item in value.items():
        least = _LOCAL_MINIMA.get(name)
        if least is None:
            raise DefinitionError(f"{key}.{name}", f"unknown key; known: {sorted(_LOCAL_MINIMA)}")
        if isinstance(item, bool) or not isinstance(item, int) or item < least:
            raise DefinitionError(
                f"{key}.{name}", f"must be an integer of at least {least}, got {item!r}"
            )
    return dict(value)


def _ref(key: str, value: Any) -> str:
    try:
        return check_ref(value)
    except UserError as exc:
        raise DefinitionError(key, str(exc)) from None


def _escalate(key: str, value: Any) -> str | None:
    return None if value is None else _ref(key, value)


def _guardrails(key: str, value: Any) -> dict[str, Any] | None:
    """`{input: [ref], output: [ref], tools: {name: [ref]}}`, each ref `MODULE:ATTR`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table of input, output and tools, got {value!r}")
    unknown = sorted(set(value) - {"input", "output", "tools"})
    if unknown:
        raise DefinitionError(f"{key}.{unknown[0]}", "unknown key; known: input, output, tools")

    def refs(at: str, items: Any) -> list[str]:
        if isinstance(items, str) or not isinstance(items, list | tuple):
            raise DefinitionError(at, f"must be a list of MODULE:ATTR, got {items!r}")
        return [_ref(at, item) for item in items]

    table: dict[str, Any] = {}
    for stage in ("input", "output"):
        if stage in value:
            table[stage] = refs(f"{key}.{stage}", value[stage])
    if "tools" in value:
        tools = value["tools"]
        if not isinstance(tools, Mapping):
            raise DefinitionError(f"{key}.tools", f"must be a table of lists, got {tools!r}")
        for name in tools:
            if not isinstance(name, str) or not name:
                raise DefinitionError(f"{key}.tools", f"is keyed by tool name, got {name!r}")
        table["tools"] = {name: refs(f"{key}.tools.{name}", v) for name, v in tools.items()}
    return table


def _memory(key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table, got {value!r}")
    if "scope" not in value:
        raise DefinitionError(key, 'needs `scope`: whose facts (e.g. "user:alice")')
    return _dataclass_table(key, MemoryPolicy, value)


def _mcp(key: str, value: Any) -> dict[str, dict[str, Any]]:
    """`{NAME: table}`, each table checked as an `MCPServer` and stored as its `to_table`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table of MCP servers by name, got {value!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        try:
            out[str(name)] = MCPServer.from_table(str(name), table).to_table()
        except UserError as exc:  # "mcp.NAME.key: problem"
            where, _, problem = str(exc).partition(": ")
            raise DefinitionError(where if where.startswith(key) else key, problem) from None
    return out


def _count(least: int, most: int) -> Callable[[str, Any], int]:
    """A rule for an integer from `least` to `most`: past them a count is a typo, and too
    large for the store's integers (a job's attempts are a column)."""

    def rule(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise DefinitionError(key, f"must be an integer from {least} to {most}, got {value!r}")
        return value

    return rule


def _mode(key: str, value: Any) -> str:
    if value not in MODES:
        raise DefinitionError(key, f"must be one of {', '.join(MODES)}, got {value!r}")
    return str(value)


_RULES: dict[str, Callable[[str, Any], Any]] = {
    "model": _optional_str,
    "base_url": _optional_str,
    "instructions": _instructions,
    "tools": _tools,
    "allow": _allow,
    "tool_choice": _optional_str,
    "output": _output,
    "limits": _limits,
    "budget": _budget,
    "retrieval": _retrieval,
    "local": _local,
    "import_path": _optional_str,
    "job_max_attempts": _count(1, MAX_JOB_ATTEMPTS),
    "source": _optional_str,
    "approval": _names,
    "subagents": subagents_rule,
    "guardrails": _guardrails,
    "escalate": _escalate,
    "memory": _memory,
    "mode": _mode,
    "max_replans": _count(0, MAX_REPLANS),
    "step_max_steps": _count(1, MAX_STEP_STEPS),
    "mcp": _mcp,
}


def _dataclass_table(key: str, cls: type, value: Any) -> dict[str, Any]:
    """`value` checked as keyword arguments of dataclass `cls`: known keys, right types,
    and whatever `cls` itself checks. TOML has no null, so `false` on a field that may
    be None (e.g. `token_budget = false`) means None: the limit is off."""
    if not isinstance(value, Mapping):
        raise DefinitionError(key, f"must be a table, got {value!r}")
    types = _field_types(cls)
    optional = _optional_fields(cls)
    value = {n: None if item is False and n in optional else item for n, item in value.items()}
    for name, item in value.items():
        if name not in types:
            raise DefinitionError(f"{key}.{name}", f"unknown key; known: {', '.join(types)}")
        if isinstance(item, list) and name in _tuple_fields(cls):
            item = tuple(item)  # TOML and JSON have arrays, not tuples
        try:
            types[name].validate_python(item, strict=True)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            raise DefinitionError(f"{key}.{name}", f"{problem}, got {item!r}") from None
    try:
        cls(**value)
    except UserError as exc:
        raise DefinitionError(key, str(exc)) from None
    return dict(value)


@cache
def _optional_fields(cls: type) -> frozenset[str]:
    """Fields that take None and are not themselves true/false switches."""
    hints = typing.get_type_hints(cls)
    return frozenset(
        f.name
        for f in fields(cls)
        if type(None) in typing.get_args(hints[f.name])
        and bool not in typing.get_args(hints[f.name])
    )


@cache
def _tuple_fields(cls: type) -> frozenset[str]:
    hints = typing.get_type_hints(cls)
    return frozenset(f.name for f in fields(cls) if typing.get_origin(hints[f.name]) is tuple)


@cache
def _field_types(cls: type) -> dict[str, TypeAdapter[Any]]:
    hints = typing.get_type_hints(cls)
    return {f.name: TypeAdapter(hints[f.name]) for f in fields(cls) if f.init}


def _prompt_parts(value: str | dict[str, Any] | None) -> str | PromptParts | None:
    return PromptParts(**value) if isinstance(value, dict) else value


def _contract(table: Mapping[str, Any] | None) -> OutputContract | None:
    if table is None:
        return None
    return OutputContract.from_schema(
        dict(table["schema"]),
        name=table["name"],
        strict=table["strict"],
        max_repairs=table["max_repairs"],
        fallback=table.get("fallback"),
    )


def _retriever(table: Mapping[str, Any] | None) -> ToolRetriever | None:
    if table is None:
        return None
    options = dict(table)
    embedder = options.pop("embedder", "auto")
    return ToolRetriever(**options, embedder="auto" if embedder == "auto" else None)
