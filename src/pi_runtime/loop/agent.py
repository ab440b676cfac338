"""`Agent`: a model, its tools and its limits; `run` turns a prompt into a `RunResult`."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel

from ..context import (
    PRESETS,
    Budget,
    ContextBuilder,
    PromptParts,
    PromptTemplate,
    Summariser,
    as_parts,
    count_tokens,
    model_summariser,
    render_system_prompt,
    runtime_block,
)
from ..contract import OutputContract
from ..exceptions import UserError
from ..guardrails import Guardrails
from ..mcp import MCPServer
from ..memory import Memory, MemoryRun, MemoryStore
from ..messages import Message, StopReason, UserMessage, redact, repair_fields, repair_text
from ..models import (
    TOOL_CHOICE_MODES,
    Model,
    ModelSettings,
    context_window_of,
    resolve_model,
)
from ..observe import (
    Event,
    Recorder,
    RunFinished,
    RunStarted,
    compute_metrics,
    default_trace_dir,
    otel,
)
from ..tools import Gate, Launcher, ToolSpec
from ..tools.retrieval import ToolRetriever
from ..tools.scope import current_call
from ._mcp import allowed_with_mcp, listed, mcp_tools_of, unavailable
from ._memory import allowed_with_memory, check_memory, request_text
from ._sync import run_blocking
from .agentfile import agent_error, read_agent_file
from .carry import carry, request_anchor
from .children import bounded, report
from .decisions import Decisions
from .definition import AgentDefinition, DefinitionError
from .escalation import EscalateHook, Escalation, escalate_run
from .guarding import checked_guardrails
from .guards import Limits
from .plan import Composition, Mode
from .pool import too_deep
from .run_result import RunResult, status_of, usage_source
from .runner import Driver
from .state import RunState
from .subagent import DEFAULT_ANSWER_BYTES, Spill, subagent_tool


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
            raise UserError(
                f"next_tool_choice must be auto, required, none or a tool name; got {choice!r}"
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
        if next_tool_choice is None:
            next_tool_choice = self.tool_choice if prompt is not None else "auto"
        self.validate_tool_choice(next_tool_choice)
        if prompt is not None and not isinstance(prompt, str):
            raise UserError(f"the prompt must be a string (or None to continue), got {prompt!r}")
        if prompt is None and not history:
            raise UserError("a run needs a prompt or a conversation to continue")
        _check_elapsed(request_elapsed_s, continuing=prompt is None)
        run_id = run_id or f"run-{uuid.uuid4().hex[:16]}"
        session = session_id or f"session-{uuid.uuid4().hex[:16]}"
        live = _live.put_nowait if _live is not None else None
        # started inside another run's tool call: a child, inside what is left of its budget
        parent = current_call()
        if parent is not None and (problem := too_deep(parent.scope)) is not None:
            raise UserError(problem)  # an agent delegating to itself, say: a tool error
        limits = self.limits if parent is None else bounded(self.limits, parent.scope)
        # OpenTelemetry export, when on, sees each event before `live` does (else: `live`)
        listener = otel.listener(live, history, self.definition.source if self.definition else None)
        mcp_specs, mcp_missing = await listed(self.mcp, self._own_names())
        try:
            recorder = Recorder(self.trace_dir, run_id, listener)
        except OSError as exc:
            raise UserError(f"cannot write traces to {self.trace_dir}: {exc}") from exc
        memory = self._open_memory(session, run_id, recorder)
        own = [*self.tools, *memory.tools] if memory is not None else self.tools
        gate = Gate(
            [*own, *mcp_specs],
            allow=allowed_with_mcp(allowed_with_memory(self.allow, memory), mcp_specs),
            session_id=session,
            retry_base_s=limits.retry_base_s,
            launcher=launcher,
            approval=self.approval,
            guardrails=self.guardrails,
        )
        offered = tuple(s.definition for s in gate.offered)
        runtime = runtime_block(offered, mode="tools" if offered else "chat")
        driver = Driver(
            model=self.model,
            gate=gate,
            limits=limits,
            system=self.system,
            tools=offered,
            settings=self.settings,
            emit=recorder.emit,
            live=live,
            model_retries=limits.model_retries,
            retry_base_s=limits.retry_base_s,
            builder=ContextBuilder(
                self.budget,
                summariser=self.summariser,
                model_window=context_window_of(self.model),
                memory=None if memory is None else memory.fit,
            ),
            runtime=runtime,
            prompt=self.template.ref,
            contract=self.contract,
            retriever=self.retriever,
            specs=tuple(gate.offered),
            state=_first_state(history, prompt, next_tool_choice),
            request_elapsed_s=request_elapsed_s,
            run_id=run_id,
            guardrails=self.guardrails,
            outer=parent.scope if parent else None,
        )
        started = time.perf_counter()
        recorder.emit(
            RunStarted(
                run_id=run_id,
                session_id=session,
                model=self.model.name,
                system=self.system,
                tools=tuple(d.name for d in offered),
                limits=limits.to_dict(),
                prompt=self.template.ref,
                runtime=runtime,
                parent_run_id=parent.scope.run_id if parent else None,
                parent_call_id=parent.tool_call_id if parent else None,
            )
        )
        for event in _prelude:  # decisions this continuation starts from (approvals)
            recorder.emit(event)
        ids: dict[str, Any] = {"run_id": run_id, "session_id": session}
        # a composed mode runs the new request in phases; a continuation goes on as ReAct
        runner = (
            driver
            if self.composition is None or prompt is None
            else self.composition.runner(driver)
        )
        try:
            try:
                if memory is not None:
                    await memory.recall(request_text(driver.state))
                state = (
                    await runner.run_transitions()
                    if mcp_missing is None
                    else unavailable(runner.state, mcp_missing)
                )
                if memory is not None:
                    await memory.finish(status_of(state.stop_reason or "internal_error"))
            except asyncio.CancelledError:
                ended = _finish(
                    _ended(runner.state, "cancelled", "the run was cancelled"),
                    recorder,
                    started,
                    **ids,
                )
                report(parent, ended)
                if _on_cancel is not None:  # what it did, for a durable session to keep
                    _on_cancel(ended)
                raise
            except Exception as exc:  # a bug in Pi itself: still a well-formed ending
                detail = redact(repair_text(f"{type(exc).__name__}: {exc}"))
                state = _ended(runner.state, "internal_error", detail)
            try:
                escalation = await escalate_run(self.escalate, state, recorder.emit, **ids)
            except asyncio.CancelledError:
                _finish(state, recorder, started, **ids)
                raise
            result = _finish(state, recorder, started, escalation=escalation, **ids)
            report(parent, result)
            return result
        finally:
            # However the run ends (even by a bug in `_finish`), the trace's buffered lines land.
            recorder.close()

    def _own_names(self) -> list[str]:
        names = [s.name for s in self.tools]
        return names if self.memory is None else [*names, *self.memory.tool_names]

    def _open_memory(self, session: str, run_id: str, recorder: Recorder) -> MemoryRun | None:
        if self.memory is None:
            return None
        return self.memory.open_run(
            session_id=session, run_id=run_id, emit=recorder.emit, counter=count_tokens
        )

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
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
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
                    )
                )
            )
        raise UserError(
            "run_sync cannot be called from a running event loop; use `await agent.run(...)`"
        )

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


class RunStream:
    """Async iterator over a run's events; `result` is set once the run has ended."""

    def __init__(self, agent: Agent, prompt: str | None, options: dict[str, Any]) -> None:
        self._agent = agent
        self._prompt = prompt
        self._options = options
        self.result: RunResult | None = None

    async def __aiter__(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        task = asyncio.create_task(self._agent.run(self._prompt, _live=queue, **self._options))
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    event = getter.result()
                    yield event
                    if isinstance(event, RunFinished):
                        break
                else:
                    getter.cancel()
                    while not queue.empty():
                        yield queue.get_nowait()
                    break
            self.result = await task
        finally:
            if not task.done():
                task.cancel()


def _check_free_text(instructions: str | PromptParts | None) -> None:
    """An output contract makes the answer a JSON object: presets shaping free text clash."""
    if isinstance(instructions, PromptParts):
        shaping = [p for p in instructions.presets if PRESETS[p].section == "output_format"]
        if shaping:
            raise UserError(
                f"prompt preset {shaping[0]} shapes a free-text answer, and the output "
                "contract makes the answer a JSON object: drop one of them"
            )


def _check_elapsed(elapsed: float, *, continuing: bool) -> None:
    if isinstance(elapsed, bool) or not isinstance(elapsed, int | float):
        raise UserError(f"request_elapsed_s must be a number of seconds, got {elapsed!r}")
    if not math.isfinite(elapsed) or elapsed < 0:
        raise UserError(f"request_elapsed_s must be finite and 0 or more, got {elapsed}")
    if elapsed and not continuing:
        raise UserError("request_elapsed_s is for continuations; a prompt starts a new request")


def _first_state(history: Sequence[Message], prompt: str | None, tool_choice: str) -> RunState:
    """A new request starts at OBSERVE with fresh guards; a continuation starts at REFLECT
    with the guard state its request's earlier runs left in the conversation.

    The caller's text enters the run here, so lone surrogates in it are repaired here."""
    history = tuple(repair_fields(m) for m in history)
    turns = sum(1 for m in history if m.role == "assistant")
    if prompt is not None:
        return RunState(
            messages=tuple(history),
            pending=(UserMessage(content=repair_text(prompt)),),
            anchor=request_anchor(history),
            next_tool_choice=tool_choice,
            turns=turns,
        )
    spent = carry(history)
    return RunState(
        phase="reflect",
        messages=tuple(history),
        anchor=spent.anchor,
        next_tool_choice=tool_choice,
        turns=turns,
        prior_steps=spent.steps,
        prior_tokens=spent.tokens,
        prior_cost_usd=spent.cost_usd,
        actions=spent.actions,
        results=spent.results,
        consecutive_errors=spent.consecutive_errors,
        tool_calls=spent.tool_calls,
        tool_limit_notice=spent.tool_limit_notice,
        repairs=spent.repairs,
    )


def _ended(state: RunState, reason: StopReason, detail: str) -> RunState:
    return replace(state, phase="done", stop_reason=reason, error=detail)


def _finish(
    state: RunState,
    recorder: Recorder,
    started: float,
    *,
    run_id: str,
    session_id: str,
    escalation: Escalation | None = None,
) -> RunResult:
    """The `RunResult` of a run that reached DONE, with its closing event written."""
    wall_ms = (time.perf_counter() - started) * 1000
    reason = state.stop_reason or "internal_error"
    metrics = compute_metrics(recorder.events, wall_ms=wall_ms, count_tokens=count_tokens)
    status = status_of(reason)
    # a contract miss has output only when the contract names a fallback
    output = state.output if reason in ("final_answer", "contract_violation") else None
    recorder.emit(
        RunFinished(
            status=status,
            stop_reason=reason,
            steps=state.steps,
            output=output,
            usage=state.usage,
            metrics=metrics,
            error=state.error,
            wall_ms=round(wall_ms, 3),
        )
    )
    recorder.close()
    return RunResult(
        status=status,
        stop_reason=reason,
        output=output,
        steps=state.steps,
        usage=state.usage,
        metrics=metrics,
        messages=state.messages,
        trace=recorder.path,
        run_id=run_id,
        session_id=session_id,
        error=state.error,
        waits=state.waits,
        pending_approvals=state.approvals,
        contract_errors=state.contract_errors,
        usage_source=usage_source(recorder.events),
        events=tuple(recorder.events),
        escalation=escalation,
    )
