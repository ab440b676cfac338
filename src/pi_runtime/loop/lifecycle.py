"""One run of an `Agent`, from its start to its `RunResult`.

`Agent.run` hands over here: its arguments are checked; the trace, the gate and the
driver are set up and `RunStarted` written; the transitions are driven; a crash or a
cancel still ends the run well formed; the escalate hook is told; `RunFinished` closes
the trace.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..context import ContextBuilder, count_tokens, runtime_block
from ..exceptions import UserError
from ..memory import MemoryRun
from ..messages import Message, StopReason, UserMessage, redact, repair_fields, repair_text
from ..models import context_window_of
from ..observe import Event, Recorder, RunFinished, RunStarted, compute_metrics, otel
from ..tools import Gate, Launcher
from ..tools.scope import current_call
from ._mcp import allowed_with_mcp, listed, unavailable
from ._memory import allowed_with_memory, request_text
from .carry import carry, request_anchor
from .children import bounded, report
from .escalation import Escalation, escalate_run
from .pool import too_deep
from .run_result import RunResult, status_of, usage_source
from .runner import Driver
from .state import RunState

if TYPE_CHECKING:
    from .agent import Agent


async def run_agent(
    agent: Agent,
    prompt: str | None,
    *,
    history: Sequence[Message],
    session_id: str | None,
    next_tool_choice: str | None,
    run_id: str | None,
    launcher: Launcher | None,
    request_elapsed_s: float,
    live_queue: asyncio.Queue[Event] | None,
    prelude: Sequence[Event],
    on_cancel: Callable[[RunResult], None] | None,
) -> RunResult:
    """The body of `Agent.run`, whose docstring says what each argument is for;
    `live_queue` gets each event as it happens (`Agent.run_stream`)."""
    if next_tool_choice is None:
        next_tool_choice = agent.tool_choice if prompt is not None else "auto"
    agent.validate_tool_choice(next_tool_choice)
    if prompt is not None and not isinstance(prompt, str):
        raise UserError(f"the prompt must be a string (or None to continue), got {prompt!r}")
    if prompt is None and not history:
        raise UserError("a run needs a prompt or a conversation to continue")
    _check_elapsed(request_elapsed_s, continuing=prompt is None)
    run_id = run_id or f"run-{uuid.uuid4().hex[:16]}"
    session = session_id or f"session-{uuid.uuid4().hex[:16]}"
    live = live_queue.put_nowait if live_queue is not None else None
    # started inside another run's tool call: a child, inside what is left of its budget
    parent = current_call()
    if parent is not None and (problem := too_deep(parent.scope)) is not None:
        raise UserError(problem)  # an agent delegating to itself, say: a tool error
    limits = agent.limits if parent is None else bounded(agent.limits, parent.scope)
    # OpenTelemetry export, when on, sees each event before `live` does (else: `live`)
    listener = otel.listener(live, history, agent.definition.source if agent.definition else None)
    mcp_specs, mcp_missing = await listed(agent.mcp, agent._own_names())
    try:
        recorder = Recorder(agent.trace_dir, run_id, listener)
    except OSError as exc:
        raise UserError(f"cannot write traces to {agent.trace_dir}: {exc}") from exc
    memory = _open_memory(agent, session, run_id, recorder)
    own = [*agent.tools, *memory.tools] if memory is not None else agent.tools
    gate = Gate(
        [*own, *mcp_specs],
        allow=allowed_with_mcp(allowed_with_memory(agent.allow, memory), mcp_specs),
        session_id=session,
        retry_base_s=limits.retry_base_s,
        launcher=launcher,
        approval=agent.approval,
        guardrails=agent.guardrails,
    )
    offered = tuple(s.definition for s in gate.offered)
    runtime = runtime_block(offered, mode="tools" if offered else "chat")
    driver = Driver(
        model=agent.model,
        gate=gate,
        limits=limits,
        system=agent.system,
        tools=offered,
        settings=agent.settings,
        emit=recorder.emit,
        live=live,
        model_retries=limits.model_retries,
        retry_base_s=limits.retry_base_s,
        builder=ContextBuilder(
            agent.budget,
            summariser=agent.summariser,
            model_window=context_window_of(agent.model),
            memory=None if memory is None else memory.fit,
        ),
        runtime=runtime,
        prompt=agent.template.ref,
        contract=agent.contract,
        retriever=agent.retriever,
        specs=tuple(gate.offered),
        state=_first_state(history, prompt, next_tool_choice),
        request_elapsed_s=request_elapsed_s,
        run_id=run_id,
        guardrails=agent.guardrails,
        outer=parent.scope if parent else None,
    )
    started = time.perf_counter()
    recorder.emit(
        RunStarted(
            run_id=run_id,
            session_id=session,
            model=agent.model.name,
            system=agent.system,
            tools=tuple(d.name for d in offered),
            limits=limits.to_dict(),
            prompt=agent.template.ref,
            runtime=runtime,
            parent_run_id=parent.scope.run_id if parent else None,
            parent_call_id=parent.tool_call_id if parent else None,
        )
    )
    for event in prelude:  # decisions this continuation starts from (approvals)
        recorder.emit(event)
    ids: dict[str, Any] = {"run_id": run_id, "session_id": session}
    # a composed mode runs the new request in phases; a continuation goes on as ReAct
    runner = (
        driver if agent.composition is None or prompt is None else agent.composition.runner(driver)
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
            if on_cancel is not None:  # what it did, for a durable session to keep
                on_cancel(ended)
            raise
        except Exception as exc:  # a bug in Pi itself: still a well-formed ending
            detail = redact(repair_text(f"{type(exc).__name__}: {exc}"))
            state = _ended(runner.state, "internal_error", detail)
        try:
            escalation = await escalate_run(agent.escalate, state, recorder.emit, **ids)
        except asyncio.CancelledError:
            _finish(state, recorder, started, **ids)
            raise
        result = _finish(state, recorder, started, escalation=escalation, **ids)
        report(parent, result)
        return result
    finally:
        # However the run ends (even by a bug in `_finish`), the trace's buffered lines land.
        recorder.close()


def _check_elapsed(elapsed: float, *, continuing: bool) -> None:
    if isinstance(elapsed, bool) or not isinstance(elapsed, int | float):
        raise UserError(f"request_elapsed_s must be a number of seconds, got {elapsed!r}")
    if not math.isfinite(elapsed) or elapsed < 0:
        raise UserError(f"request_elapsed_s must be finite and 0 or more, got {elapsed}")
    if elapsed and not continuing:
        raise UserError("request_elapsed_s is for continuations; a prompt starts a new request")


def _open_memory(agent: Agent, session: str, run_id: str, recorder: Recorder) -> MemoryRun | None:
    if agent.memory is None:
        return None
    return agent.memory.open_run(
        session_id=session, run_id=run_id, emit=recorder.emit, counter=count_tokens
    )


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
