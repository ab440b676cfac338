"""`Agent`: a model, its tools and its limits; `run` turns a prompt into a `RunResult`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel

from ..context import (
    PRESETS,
    Budget,
    PromptParts,
    PromptTemplate,
    Summariser,
    as_parts,
    model_summariser,
    render_system_prompt,
)
from ..contract import OutputContract
from ..exceptions import UserError
from ..guardrails import Guardrails
from ..mcp import MCPServer
from ..memory import Memory, MemoryStore
from ..messages import Message, clipped
from ..models import TOOL_CHOICE_MODES, Model, ModelSettings, resolve_model
from ..observe import Event, default_trace_dir
from ..tools import Launcher, ToolSpec
from ..tools.retrieval import ToolRetriever
from ._mcp import mcp_tools_of
from ._memory import check_memory
from ._sync import run_blocking
from .agentfile import agent_error, read_agent_file
from .decisions import Decisions
from .definition import AgentDefinition, DefinitionError
from .escalation import EscalateHook
from .guarding import checked_guardrails
from .guards import Limits
from .lifecycle import run_agent
from .plan import Composition, Mode
from .run_result import RunResult, unanswered
from .run_stream import RunStream
from .subagent import DEFAULT_ANSWER_BYTES, Spill, subagent_tool

_SHOWN_TOOLS = 12  # tools a refused tool choice lists


class Agent(Decisions):
    """An agent: a model, the tools it may call, and the guards of its runs.

    Args:
        model: a `Model`, or a spec string (`scripted:PATH`, `replay:TRACE`, …).
        tools: the tools the agent knows.
        allow: names it may call (default: all of `tools`); others are `permission_denied`.
        instructions: the role (a string) or all parts of the system prompt
            (`PromptParts`); output discipline rules are added unless
            `PromptParts(discipline=False)`.
        prompt_template: the versioned template the system prompt is rendered from.
        budget: the token budget of each request (`Budget`: context window, output
            reserve, compression settings); by default the model's own window.
        summariser: condenses dropped turns when their digest does not fit: a callable,
            "model" to ask the agent's own model, or None to trim the digest instead.
        output: an output contract (or a pydantic model to build one from): the final
            answer must be a JSON object matching it; a miss is sent back for repair,
            at most `max_repairs` times, then the run ends `contract_violation`.
        tool_retrieval: past its threshold, offer each call only the tools it needs.
        limits: the guards, circuit breakers and retries of each request (`Limits`:
            `max_steps`, `token_budget`, `wall_clock_s`, `model_retries`, …).
        settings: model request settings (temperature, max output tokens, …).
        tool_choice: the tool choice of each request's first model call (`auto`,
            `required`, `none` or a tool name); `run(next_tool_choice=…)` overrides it.
        trace_dir: where JSONL traces go (default `$PI_TRACE_DIR` or `./.pi/traces`);
            False writes none.
        approval: names of tools whose calls wait for a person's approval (besides those
            marked `@tool(requires_approval=True)`); see `approve` and `reject`.
        guardrails: checks of the user's message, the final answer and tool arguments
            (`Guardrails`); see docs/guardrails.md.
        escalate: called with an `EscalationContext` when a run ends `stopped` or
            `failed`; what it returns (JSON) is kept in `RunResult.escalation`.
        memory: long-term facts of one scope (`Memory`): read into each run's memory
            layer at its start; `remember` / `recall` tools added (and allowed).
        mode: `react` (one ReAct loop, the default), `plan` (plan, execute each step as a
            bounded loop with its own tools, reflect, replan) or `auto` (a router call
            picks `direct`, `react` or `plan` per request); see docs/modes.md.
        max_replans: replans a `plan` run may make before a failing step stops it.
        step_max_steps: model calls each plan step's executor may make.
        mcp: MCP servers whose tools the agent may call (`MCPServer`): each tool passes
            the same gate as the agent's own; one session per server lasts until
            `aclose` (see docs/mcp.md).

    Attributes:
        definition: the `AgentDefinition` this agent was built from (`Agent.from_file`,
            a durable session's stored agent), else None.
        instructions: the instructions the system prompt was rendered from (an output
            contract's format included); `as_tool` renders them again for a sub-agent.
    """

    def __init__(
        self,
        model: Model | str | None = None,
        *,
        tools: Iterable[ToolSpec] = (),
        allow: Iterable[str] | None = None,
        instructions: str | PromptParts | None = None,
        prompt_template: PromptTemplate | None = None,
        budget: Budget | None = None,
        summariser: Summariser | Literal["model"] | None = None,
        output: OutputContract | type[BaseModel] | None = None,
        tool_retrieval: ToolRetriever | None = None,
        limits: Limits | None = None,
        settings: ModelSettings | None = None,
        tool_choice: str = "auto",
        trace_dir: str | Path | bool | None = None,
        approval: Iterable[str] = (),
        guardrails: Guardrails | None = None,
        escalate: EscalateHook | None = None,
        memory: Memory | None = None,
        mode: Mode = "react",
        max_replans: int = 2,
        step_max_steps: int = 5,
        mcp: Iterable[MCPServer] = (),
    ) -> None:
        self.model = (
            model if model is not None and not isinstance(model, str) else resolve_model(model)
        )
        self.tools = list(tools)
        for spec in self.tools:
            if not isinstance(spec, ToolSpec):
                raise UserError(f"tools must be made with @tool, got {spec!r}")
        names = [s.name for s in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(f"two tools share the name(s): {', '.join(duplicates)}")
        self.allow = None if allow is None else frozenset(allow)
        unknown = sorted((self.allow or frozenset()) - set(names))
        if unknown:
            raise UserError(f"allow names tools the agent does not have: {', '.join(unknown)}")
        if isinstance(approval, str):
            raise UserError(f"approval must be a list of tool names, got {approval!r}")
        given = frozenset(approval)
        if given - set(names):
            missing = ", ".join(sorted(given - set(names)))
            hint = " (an MCP server's tools go in its own `approval`)" if mcp else ""
            raise UserError(f"approval names tools the agent does not have: {missing}{hint}")
        self.approval = given | {s.name for s in self.tools if s.requires_approval}
        self.mcp = mcp_tools_of(mcp)
        self._decided: set[tuple[str, str]] = set()  # (run, call) decided in memory
        self.memory = check_memory(memory, names)
        if limits is not None and not isinstance(limits, Limits):
            raise UserError(f"limits must be a Limits, got {limits!r}")
        self.limits = limits or Limits()
        if isinstance(output, type):
            output = OutputContract.from_model(output)
        self.contract = output
        if output is not None:
            _check_free_text(instructions)
            parts = (
                instructions
                if isinstance(instructions, PromptParts)
                else PromptParts(role=instructions.strip() if instructions else PromptParts().role)
            )
            instructions = replace(parts, output_format=output.instructions())
        self.instructions = instructions
        self.retriever = tool_retrieval
        self.system, self.template = render_system_prompt(instructions, template=prompt_template)
        self.budget = budget or Budget()
        self.summariser = model_summariser(self.model) if summariser == "model" else summariser
        self.settings = settings or ModelSettings()
        self.trace_dir: Path | None
        if trace_dir is False:
            self.trace_dir = None
        elif trace_dir is None or trace_dir is True:
            self.trace_dir = default_trace_dir()
        else:
            self.trace_dir = Path(trace_dir)
        self.definition: AgentDefinition | None = None
        self.tool_choice = tool_choice
        self.validate_tool_choice(tool_choice)
        self.guardrails = checked_guardrails(guardrails, names)
        if escalate is not None and not callable(escalate):
            raise UserError(f"escalate must be a callable, got {escalate!r}")
        self.escalate = escalate
        self.mode, self.max_replans, self.step_max_steps = mode, max_replans, step_max_steps
        offered = [s.definition for s in self.tools if self.allow is None or s.name in self.allow]
        self.composition = Composition.of(
            mode,
            max_replans=max_replans,
            step_max_steps=step_max_steps,
            parts=as_parts(instructions),
            tools=offered,
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        trace_dir: str | Path | bool | None = None,
        memory_store: MemoryStore | None = None,
        **overrides: Any,
    ) -> Agent:
        """The agent an agent file (TOML) defines.

        Args:
            path: the agent file.
            trace_dir: where its runs write traces (as `Agent`).
            memory_store: where the facts of the file's `[memory]` live (a `MemoryStore`:
                the durable store, or a `LocalMemoryStore`).
            overrides: `AgentDefinition` fields replacing the file's (`limits` and
                `budget` merged field by field), e.g. `model="scripted:run.json"`.
        """
        try:
            definition = read_agent_file(path).with_overrides(**overrides)
        except TypeError as exc:
            raise UserError(f"Agent.from_file: {exc}") from None
        try:
            return definition.build_agent(trace_dir=trace_dir, memory_store=memory_store)
        except DefinitionError as exc:
            raise agent_error(definition, exc) from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the model (its HTTP client and connections) and the MCP servers'
        sessions; `async with` does it on exit.

        A later run opens the model's client and the sessions again.
        """
        await self.mcp.aclose()
        await self.model.aclose()

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        keep_history: bool = False,
        spill: Spill | None = None,
        max_answer_bytes: int = DEFAULT_ANSWER_BYTES,
    ) -> ToolSpec:
        """This agent as a tool of another (a sub-agent), called with `{"task": "…"}`.

        Each call runs this agent on the task, with its own tools, allow-list and limits
        but inside what is left of the calling run's token, cost and wall-clock budget;
        its usage is counted in the calling run's. The answer is the tool result; a run
        that does not complete is a `subagent_failed` tool error (see `loop.subagent`).

        Args:
            name: the tool's name; description: what the parent's model reads.
            keep_history: keep this agent's conversation across the calls of one
                parent run (default: a fresh conversation per call).
            spill: turns an answer over `max_answer_bytes` into what the parent reads
                instead (e.g. `data.answers.spill_to(plane)`); without it, the answer
                is cut there with a marker.
        """
        return subagent_tool(
            self,
            name,
            description,
            keep_history=keep_history,
            spill=spill,
            max_answer_bytes=max_answer_bytes,
        )

    def validate_tool_choice(self, choice: str) -> None:
        """Raise UserError unless `choice` is a tool choice this agent can make."""
        allowed = self.allow if self.allow is not None else {s.name for s in self.tools}
        if choice not in TOOL_CHOICE_MODES and choice not in allowed:
            names = sorted(allowed)
            shown = ", ".join(names[:_SHOWN_TOOLS]) + (", …" if len(names) > _SHOWN_TOOLS else "")
            raise UserError(
                "the tool choice must be auto, required, none or a tool the model may call"
                f" ({shown or 'it may call none'}); got {clipped(repr(choice), 80)}"
            )

    async def run(
        self,
        prompt: str | None,
        *,
        history: Sequence[Message] = (),
        session_id: str | None = None,
        next_tool_choice: str | None = None,
        run_id: str | None = None,
        launcher: Launcher | None = None,
        request_elapsed_s: float = 0.0,
        _live: asyncio.Queue[Event] | None = None,
        _prelude: Sequence[Event] = (),
        _on_cancel: Callable[[RunResult], None] | None = None,
    ) -> RunResult:
        """Run the agent on `prompt` until it answers or a guard stops it.

        A prompt starts a new request. A continuation (prompt None) goes on with the
        request `history` ends in: its guards start from what the earlier runs spent
        (steps, tokens, tool calls, loop and no-progress hashes, errors in a row,
        contract repairs; see `carry`), and are checked before the first model call, so
        a request that already tripped one stops at once. `RunResult.steps` and `usage`
        still count this run only.

        Args:
            prompt: the user's message; None continues `history` as it stands (e.g.
                after a background job's result was delivered into it).
            history: earlier messages of the conversation.
            session_id: the conversation's id (feeds idempotency keys); a new one if None.
            next_tool_choice: tool choice for the first model call only (default: the
                agent's `tool_choice` for a new request, `auto` for a continuation).
            run_id: the run's id (a new one if None), e.g. the id a store gave it.
            launcher: starts jobs for background tools; without one they run inline.
            request_elapsed_s: seconds earlier runs of this request took (a continuation
                only), so `wall_clock_s` covers the whole request.
        """
        return await run_agent(
            self,
            prompt,
            history=history,
            session_id=session_id,
            next_tool_choice=next_tool_choice,
            run_id=run_id,
            launcher=launcher,
            request_elapsed_s=request_elapsed_s,
            live_queue=_live,
            prelude=_prelude,
            on_cancel=_on_cancel,
        )

    def _own_names(self) -> list[str]:
        names = [s.name for s in self.tools]
        return names if self.memory is None else [*names, *self.memory.tool_names]

    def run_sync(
        self,
        prompt: str | None,
        *,
        history: Sequence[Message] = (),
        session_id: str | None = None,
        next_tool_choice: str | None = None,
        run_id: str | None = None,
        launcher: Launcher | None = None,
        request_elapsed_s: float = 0.0,
    ) -> RunResult:
        """`run` for code without an event loop; takes the same arguments.

        Each call runs on a new event loop, and the model's connections and the MCP
        servers' sessions opened on it are closed when it ends.

        It returns a `RunResult` (Ctrl-C aside: KeyboardInterrupt, after the run ended
        `cancelled`). Nothing outside this call can cancel its run, so a cancel is a stray
        one, such as the `asyncio.timeout` of a tool left behind because it would not
        end, firing on the task it was entered in: the run ends `cancelled`.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError(
                "run_sync cannot be called from a running event loop; use `await agent.run(...)`"
            )
        stopped: list[RunResult] = []  # what the run did, if a cancel stopped it
        try:
            return run_blocking(
                self.mcp.closing(
                    self.run(
                        prompt,
                        history=history,
                        session_id=session_id,
                        next_tool_choice=next_tool_choice,
                        run_id=run_id,
                        launcher=launcher,
                        request_elapsed_s=request_elapsed_s,
                        _on_cancel=stopped.append,
                    )
                )
            )
        except asyncio.CancelledError:
            if not stopped:
                raise
            ended = stopped[-1]
            return replace(ended, messages=(*ended.messages, *unanswered(ended, ended.messages)))

    def run_stream(
        self,
        prompt: str | None,
        *,
        history: Sequence[Message] = (),
        session_id: str | None = None,
        next_tool_choice: str | None = None,
        run_id: str | None = None,
        launcher: Launcher | None = None,
        request_elapsed_s: float = 0.0,
    ) -> RunStream:
        """Run while yielding events as they happen (`ModelDelta`s included); takes the
        same arguments as `run`."""
        options: dict[str, Any] = {
            "history": history,
            "session_id": session_id,
            "next_tool_choice": next_tool_choice,
            "run_id": run_id,
            "launcher": launcher,
            "request_elapsed_s": request_elapsed_s,
        }
        return RunStream(self, prompt, options)


def _check_free_text(instructions: str | PromptParts | None) -> None:
    """An output contract makes the answer a JSON object: presets shaping free text clash."""
    if isinstance(instructions, PromptParts):
        shaping = [p for p in instructions.presets if PRESETS[p].section == "output_format"]
        if shaping:
            raise UserError(
                f"prompt preset {shaping[0]} shapes a free-text answer, and the output "
                "contract makes the answer a JSON object: drop one of them"
            )
