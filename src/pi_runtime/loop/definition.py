"""`AgentDefinition`: everything that defines an agent, as plain JSON values.

The declarative twin of `Agent`. An agent file is read into one (`pi_runtime.loop.
agentfile`); a durable session stores one (`to_dict`), and every continuation, by any
worker, builds that same agent from it (`build_agent`): the allow-list, instructions,
output contract, budget, retrieval and tool choice included.

Each key is one entry of `_RULES` (`loop.definition_rules`): a checker that turns a raw
value into the stored one or raises `DefinitionError` naming the key. Adding a key is one
field and one rule.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..context import Budget
from ..exceptions import UserError
from ..guardrails import Guardrails, load_callable
from ..mcp import MCPServer
from ..memory import Memory, MemoryStore
from ..models import Model, resolve_model
from ..tools import ToolSpec
from ..tools.loading import load_tools
from ..userfiles import UserFileError, resolved
from .definition_rules import _RULES, _blame, _comparable, _contract, _prompt_parts, _retriever

# re-exported: callers import the error and the bounds from this module
from .definition_rules import MAX_JOB_ATTEMPTS as MAX_JOB_ATTEMPTS
from .definition_rules import MAX_REPLANS as MAX_REPLANS
from .definition_rules import MAX_STEP_STEPS as MAX_STEP_STEPS
from .definition_rules import DefinitionError as DefinitionError
from .guards import Limits
from .plan import Mode

if TYPE_CHECKING:
    from .agent import Agent

DEFAULT_JOB_ATTEMPTS = 5
# Model specs whose argument is a file path: made absolute, so any folder works.
PATH_SPECS = ("scripted", "replay", "local")
EMBEDDED_NAMES = ("qwen2.5-coder-0.5b", "gemma-3-270m")  # `local:NAME`, not a path
# Cheap, stateful-per-run models are built anew each time; others are worth keeping.
_FRESH_SPECS = ("scripted", "replay")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """An agent as data: what `pi run --agent FILE.toml` reads and a session stores.

    Attributes:
        model: a model spec string (None: the embedded default).
        base_url: an OpenAI-compatible server for the model.
        instructions: the role (a string), or the `PromptParts` fields as a table.
        tools: `MODULE:ATTR` references, each a tool or a list of tools.
        allow: the tools it may call (None: all); others are `permission_denied`.
        tool_choice: the tool choice of a user request's first model call.
        output: the output contract: `{"name", "schema", "strict", "max_repairs"}` and
            an optional `fallback` answer for when the repairs are spent.
        limits: `Limits` fields; missing ones take their defaults.
        budget: `Budget` fields of each request's token budget.
        retrieval: tool retrieval (`threshold`, `top_k`, `always_include`, `embedder`
            of `auto` or `bm25`); None: every tool is offered.
        local: settings of the embedded engine, used when the model is `local`:
            `threads`, `context` (its window in tokens), `max_tokens` (a reply's limit).
        import_path: the folder tool modules import from (an agent file's own folder).
        job_max_attempts: how often a background job may be interrupted (a worker dying)
            and started again before it fails (1 to `MAX_JOB_ATTEMPTS`).
        approval: tools whose calls wait for a person's approval (besides those marked
            `@tool(requires_approval=True)`).
        mode: `react` (the default), `plan` or `auto` (see `Agent`).
        max_replans: replans a `plan` run may make (0 to `MAX_REPLANS`).
        step_max_steps: model calls each plan step's executor may make (1 to
            `MAX_STEP_STEPS`).
        source: the file the definition was read from, if any (for messages only).
        subagents: agents this one calls as tools, by tool name: `{"description",
            "agent": <their definition's to_dict>, "keep_history"}`. An agent file names
            the other file; the definition holds it read in, so every worker builds the
            same child. They nest at most 8 levels, 64 in all (`loop._subagent_rule`).
        guardrails: `MODULE:ATTR` checks: `input` and `output` lists, and `tools`, a
            table of lists by tool name (see `Guardrails`).
        escalate: `MODULE:ATTR` of the hook told when a run ends `stopped` or `failed`.
        memory: long-term memory (`MemoryPolicy` fields: `scope`, `read`, `top_k`,
            `budget_tokens`, `write`, `embedder`); None: the agent has none.
        mcp: MCP servers whose tools the agent calls, by name: each an `MCPServer`'s
            `to_table` (`command` or `url`, `timeout_s`, `allow`, `block`, `prefix`, …),
            secrets as `${VAR}` references, never their values.
    """

    model: str | None = None
    base_url: str | None = None
    instructions: str | dict[str, Any] | None = None
    tools: tuple[str, ...] = ()
    allow: tuple[str, ...] | None = None
    tool_choice: str | None = None
    output: dict[str, Any] | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    retrieval: dict[str, Any] | None = None
    local: dict[str, Any] = field(default_factory=dict)
    import_path: str | None = None
    job_max_attempts: int = DEFAULT_JOB_ATTEMPTS
    source: str | None = None
    approval: tuple[str, ...] = ()
    subagents: dict[str, dict[str, Any]] = field(default_factory=dict)
    guardrails: dict[str, Any] | None = None
    escalate: str | None = None
    memory: dict[str, Any] | None = None
    mode: str = "react"
    max_replans: int = 2
    step_max_steps: int = 5
    mcp: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for item in fields(self):
            rule = _RULES[item.name]
            object.__setattr__(self, item.name, rule(item.name, getattr(self, item.name)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentDefinition:
        """A definition from its `to_dict` form (or an agent file's resolved table)."""
        if not isinstance(data, Mapping):
            raise UserError(f"an agent definition is a table of keys, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_RULES))
        if unknown:
            raise DefinitionError(unknown[0], f"unknown key; known keys: {', '.join(_RULES)}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, as a session stores them."""
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        data["tools"] = list(self.tools)
        data["allow"] = None if self.allow is None else list(self.allow)
        data["approval"] = list(self.approval)
        return data

    def with_overrides(self, **changes: Any) -> AgentDefinition:
        """A copy with `changes` (None values are ignored); `limits`, `budget`, `local`
        and `memory` are merged field by field, as command-line flags override an agent file."""
        given = {k: v for k, v in changes.items() if v is not None}
        for table in ("limits", "budget", "local", "memory"):
            if table in given and getattr(self, table) is not None:
                given[table] = {**getattr(self, table), **given[table]}
        return dataclasses.replace(self, **given)

    def same_agent(self, other: AgentDefinition) -> bool:
        """Whether both define the same agent (limits, job attempts and the embedded
        engine's settings aside, which a turn or a machine may change)."""
        return _comparable(self.to_dict()) == _comparable(other.to_dict())

    def load_tools(self) -> list[ToolSpec]:
        """The tools, imported (a DefinitionError on `tools` names the one that failed)."""
        try:
            return [spec for ref in self.tools for spec in load_tools(ref, self.import_path)]
        except DefinitionError:
            raise
        except UserError as exc:
            raise DefinitionError("tools", str(exc)) from None

    def build_agent(
        self,
        *,
        trace_dir: str | Path | bool | None = None,
        models: dict[str, Model] | None = None,
        model: Model | None = None,
        limits: Mapping[str, Any] | None = None,
        memory_store: MemoryStore | None = None,
    ) -> Agent:
        """The `Agent` this defines.

        Args:
            trace_dir: where its runs write traces (as `Agent`).
            models: a cache of models costly to load, kept by the caller across calls.
            model: a model object to use instead of building one from `model`.
            limits: limits overriding the definition's for this agent only.
            memory_store: where the facts of `memory` live (required when it is set).
        """
        from .agent import Agent  # agent.py imports this module

        merged = {**self.limits, **(limits or {})}
        guardrails, escalate = self._hooks()
        try:
            agent = Agent(
                model or self._model(models),
                tools=self._all_tools(trace_dir, models),
                allow=self.allow,
                instructions=_prompt_parts(self.instructions),
                output=_contract(self.output),
                budget=Budget(**self.budget),
                tool_retrieval=_retriever(self.retrieval),
                limits=Limits(**merged),
                tool_choice=self.tool_choice or "auto",
                trace_dir=trace_dir,
                approval=self.approval,
                guardrails=guardrails,
                escalate=escalate,
                memory=self._memory(memory_store),
                mode=cast(Mode, self.mode),  # checked by its rule
                max_replans=self.max_replans,
                step_max_steps=self.step_max_steps,
                mcp=[MCPServer.from_table(name, table) for name, table in self.mcp.items()],
            )
        except DefinitionError:
            raise
        except UserError as exc:
            raise DefinitionError(_blame(str(exc)), str(exc)) from None
        agent.definition = self
        return agent

    def _all_tools(
        self, trace_dir: str | Path | bool | None, models: dict[str, Model] | None
    ) -> list[ToolSpec]:
        """The tools, then each sub-agent built from its stored definition, as a tool."""
        specs = self.load_tools()
        clash = sorted({s.name for s in specs} & set(self.subagents))
        if clash:
            raise DefinitionError(
                f"subagents.{clash[0]}", "a tool of `tools` has this name: name it otherwise"
            )
        for name, entry in self.subagents.items():
            key = f"subagents.{name}"
            try:
                child = AgentDefinition.from_dict(entry["agent"])
                agent = child.build_agent(trace_dir=trace_dir, models=models)
                specs.append(
                    agent.as_tool(
                        name, entry["description"], keep_history=entry.get("keep_history", False)
                    )
                )
            except DefinitionError as exc:
                raise DefinitionError(f"{key}.agent", f"{exc.key}: {exc.problem}") from None
            except UserError as exc:
                raise DefinitionError(key, str(exc)) from None
        return specs

    def _hooks(self) -> tuple[Guardrails | None, Any]:
        """The guardrails and the escalate hook, imported (a DefinitionError names the
        reference that failed)."""

        def load(key: str, ref: str) -> Any:
            try:
                return load_callable(ref, self.import_path)
            except UserError as exc:
                raise DefinitionError(key, str(exc)) from None

        table = self.guardrails or {}
        guardrails = None
        if table:
            guardrails = Guardrails(
                input=[load("guardrails.input", r) for r in table.get("input", ())],
                output=[load("guardrails.output", r) for r in table.get("output", ())],
                tools={
                    name: [load(f"guardrails.tools.{name}", r) for r in refs]
                    for name, refs in table.get("tools", {}).items()
                },
            )
        escalate = None if self.escalate is None else load("escalate", self.escalate)
        return guardrails, escalate

    def _memory(self, store: MemoryStore | None) -> Memory | None:
        if self.memory is None:
            return None
        if store is None:
            raise DefinitionError(
                "memory",
                "needs a store for its facts: run the agent with a store (`pi run --session`, "
                "`--db`) or pass `memory_store`",
            )
        return Memory.from_policy(store, self.memory)

    def _model(self, cache: dict[str, Model] | None) -> Model:
        key = f"{self.model}@{self.base_url}@{sorted(self.local.items())}"
        fresh = (self.model or "").partition(":")[0] in _FRESH_SPECS
        if cache is not None and not fresh and key in cache:
            return cache[key]
        try:
            model = resolve_model(self.model, base_url=self.base_url, local=self.local)
        except UserError as exc:
            raise DefinitionError("model", str(exc)) from None
        if cache is not None and not fresh:
            cache[key] = model
        return model


def absolute_model(spec: str | None, base: Path) -> str | None:
    """`spec` with a file path argument made absolute against `base`; a DefinitionError
    (`model`) when the path cannot be resolved (a symlink loop)."""
    if spec is None:
        return None
    prefix, sep, rest = spec.partition(":")
    if sep and rest and prefix in PATH_SPECS and rest not in EMBEDDED_NAMES:
        try:
            return f"{prefix}:{resolved(rest, base=base, what='model')}"
        except UserFileError as exc:
            raise DefinitionError("model", f"{spec}: {exc.reason}") from None
    return spec


def definition_here(
    *,
    model: str | None = None,
    tools: tuple[str, ...] | list[str] = (),
    limits: Limits | None = None,
    base_url: str | None = None,
    job_max_attempts: int = DEFAULT_JOB_ATTEMPTS,
) -> AgentDefinition:
    """A definition from command-line flags: file paths made absolute against the
    current folder, which is also where the tool modules import from."""
    return AgentDefinition(
        model=absolute_model(model, Path.cwd()),
        tools=tuple(tools),
        limits={} if limits is None else limits.to_dict(),
        base_url=base_url,
        import_path=os.getcwd(),
        job_max_attempts=job_max_attempts,
    )
