"""OBSERVE → THINK → ACT → REFLECT → DONE as pure functions `state → (state, events)`.

Effects (calling the model, running tools, reading the clock) happen in the driver; each
transition receives their results as arguments, so a trace can be re-derived exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from ..guardrails import Trip
from ..messages import (
    AssistantMessage,
    Message,
    Phase,
    StopReason,
    TextBlock,
    ToolCall,
    ToolErrorKind,
    UserMessage,
    tool_error_info,
    tool_error_result,
)
from ..messages.canonical import action_hash, text_hash
from ..observe import (
    ApprovalRequested,
    Event,
    GuardrailTripped,
    GuardTriggered,
    JobStarted,
    LoopPhase,
    MessageAppended,
    SecurityAudit,
    ToolResult,
    ToolRetried,
    Transition,
)
from ..tools import PendingApproval, ToolOutcome
from .breakers import tool_limit_notice
from .carry import KEEP
from .guards import Limits, check_guards
from .state import RunState, evolved

Step = tuple[RunState, list[Event]]

_DURATION = attrgetter("duration_ms")
"""A tool attempt's duration: summed over a call's attempts without a comprehension."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """An output contract's verdict on a final answer, as THINK needs it."""

    value: Any
    errors: tuple[str, ...]
    repair: str
    max_repairs: int
    fallback: Any = None
    """The output when the repairs are spent (None: no output)."""

    @property
    def ok(self) -> bool:
        return not self.errors


GUARDS = frozenset(
    {
        "max_steps",
        "token_budget",
        "wall_clock",
        "consecutive_errors",
        "loop_detected",
        "no_progress",
    }
)


def _move(state: RunState, target: LoopPhase, events: list[Event], **changes: object) -> Step:
    events.append(Transition(source=state.phase, target=target, step=state.steps))
    changes["phase"] = target
    return evolved(state, changes), events


def _observe_next(state: RunState, events: list[Event], **changes: object) -> Step:
    """REFLECT moves to OBSERVE; with nothing pending, on to THINK in the same copy.

    OBSERVE with nothing to take in only moves on (see `observe`): both transitions are
    written as ever, but the state between them, which nothing reads, is never made
    (a copy of the state a turn).
    """
    if state.pending:
        return _move(state, "observe", events, **changes)
    events.append(Transition(source=state.phase, target="observe", step=state.steps))
    events.append(Transition(source="observe", target="think", step=state.steps))
    changes["phase"] = "think"
    return evolved(state, changes), events


def _append(
    state_messages: tuple[Message, ...], new: list[Message], events: list[Event]
) -> tuple[Message, ...]:
    start = len(state_messages)
    for offset, message in enumerate(new):
        events.append(MessageAppended(index=start + offset, message=message))
    return state_messages + tuple(new)


def observe(state: RunState) -> Step:
    """Normalise pending inputs into messages and go on to THINK."""
    events: list[Event] = []
    if not state.pending:  # every turn after the first: nothing new to take in
        return _move(state, "think", events)
    anchor = state.anchor
    for offset, message in enumerate(state.pending):
        if isinstance(message, UserMessage) and message.is_request:
            anchor = len(state.messages) + offset
    messages = _append(state.messages, list(state.pending), events)
    return _move(state, "think", events, messages=messages, pending=(), anchor=anchor)


def _with_phases(message: AssistantMessage, phase: Phase) -> AssistantMessage:
    """`message` with its text in `phase`: text beside tool calls is commentary, text of a
    message without calls is final."""
    for block in message.content:
        if isinstance(block, TextBlock) and block.phase != phase:
            break
    else:
        return message  # every answer but a few: a loop, not a generator, to find out
    content = tuple(
        replace(b, phase=phase) if isinstance(b, TextBlock) else b for b in message.content
    )
    return replace(message, content=content)


def within_output_limit(message: AssistantMessage) -> AssistantMessage:
    """`message` with every tool call marked truncated when the output limit cut it.

    The runtime decides, not the adapter: a response that ended on the output limit
    may have lost the end of any call in it, so none of them is run.
    """
    if message.finish_reason != "length" or all(c.truncated for c in message.tool_calls):
        return message
    content = tuple(
        replace(b, truncated=True) if isinstance(b, ToolCall) else b for b in message.content
    )
    return replace(message, content=content)


def think(state: RunState, response: AssistantMessage, check: Verdict | None = None) -> Step:
    """Take the model's answer: a final answer ends the run, tool calls go to ACT.

    With an output contract, `check` is the verdict on a final answer: a match ends the
    run with the JSON object as output; a miss sends the repair message back and asks
    again, until the contract's repairs are spent (`contract_violation`).
    """
    events: list[Event] = []
    message = within_output_limit(response)
    calls = message.tool_calls  # asked once: a property that builds a tuple
    message = _with_phases(message, "commentary" if calls else "final")
    common = {
        "messages": _append(state.messages, [message], events),
        "steps": state.steps + 1,
        "turns": state.turns + 1,
        "usage": state.usage + message.usage,
        "next_tool_choice": "auto",  # one-shot: consumed by the call just made
        "response": message,
    }
    if not calls:
        if check is None:
            return _move(
                state, "done", events, stop_reason="final_answer", output=message.text, **common
            )
        if check.ok:
            return _move(
                state, "done", events, stop_reason="final_answer", output=check.value, **common
            )
        if state.repairs < check.max_repairs:
            # the repair turn joins the conversation; the question stays the anchor
            repair = UserMessage(content=check.repair, origin="contract_repair")
            common["messages"] = _append(common["messages"], [repair], events)  # type: ignore[arg-type]
            # through REFLECT: a repair is a model call like any other for the guards
            return _move(state, "reflect", events, repairs=state.repairs + 1, **common)
        stopped, more = finish(
            # the fallback, if any, stands in for the answer; the errors say why
            replace(state, **common, contract_errors=check.errors, output=check.fallback),  # type: ignore[arg-type]
            "contract_violation",
            "; ".join(check.errors),
        )
        return stopped, events + more
    return _move(state, "act", events, **common)


def model_failed(state: RunState, error: str) -> Step:
    """The model call failed for good: the run ends with `model_error`."""
    return finish(state, "model_error", error)


def act(
    state: RunState, outcomes: tuple[ToolOutcome, ...], digests: Sequence[str] | None = None
) -> Step:
    """Record every tool outcome as a tool-result message, then REFLECT (or stop).

    `digests` are the calls' `action_hash`es when the caller has them already.
    """
    events: list[Event] = []
    consecutive = state.consecutive_errors
    actions: list[str] = []
    results: list[str] = []
    fatal: tuple[StopReason, str] | None = None
    waits: list[tuple[str, str]] = []
    approvals: list[PendingApproval] = []
    answers: list[Message] = []
    if digests is None:
        digests = [action_hash(o.call.name, o.call.arguments, o.call.raw) for o in outcomes]
    for outcome, act_hash in zip(outcomes, digests, strict=True):
        call, message = outcome.call, outcome.message
        actions.append(act_hash)
        if message is not None:
            answers.append(message)
        if outcome.trips:
            events.extend([tripped(trip) for trip in outcome.trips])
        if outcome.approval is not None:
            # checked, not run: a person decides (the call counts for loop detection now)
            pending = outcome.approval
            approvals.append(pending)
            events.append(
                ApprovalRequested(
                    tool_call_id=call.id,
                    name=call.name,
                    arguments=pending.arguments,
                    fingerprint=pending.fingerprint,
                )
            )
            continue
        if message is None:
            # a background job computes this result; the run will wait for it. The call
            # counts for loop detection now, its result for no-progress once delivered.
            assert outcome.job_id is not None
            waits.append((call.id, outcome.job_id))
            events.append(JobStarted(tool_call_id=call.id, name=call.name, job_id=outcome.job_id))
            continue
        for attempt in outcome.attempts:
            if attempt.retry_in_ms is not None and attempt.error is not None:
                events.append(
                    ToolRetried(
                        tool_call_id=call.id,
                        name=call.name,
                        attempt=attempt.number,
                        error_kind=attempt.error.kind,
                        retry_in_ms=round(attempt.retry_in_ms, 3),
                    )
                )
        events.append(
            ToolResult(
                tool_call_id=call.id,
                name=call.name,
                executed=outcome.executed,
                is_error=message.is_error,
                error_kind=message.error.kind if message.error else None,
                error_class=outcome.error_class,
                attempts=len(outcome.attempts),
                duration_ms=round(sum(map(_DURATION, outcome.attempts)), 3),
                idempotency_key=outcome.idempotency_key,
                result_bytes=outcome.result_bytes,
                result_truncated=outcome.result_truncated,
            )
        )
        consecutive = consecutive + 1 if message.is_error else 0
        results.append(f"{act_hash}:{text_hash(message.content)}")
        if outcome.error_class == "security" and fatal is None:
            detail = message.error.message if message.error else "security violation"
            events.append(SecurityAudit(tool_call_id=call.id, name=call.name, detail=detail))
            fatal = ("security", f"{call.name}: {detail}")
        elif outcome.error_class == "unrecoverable" and fatal is None:
            fatal = (
                "tool_error",
                f"{call.name}: {message.error.message if message.error else 'failed'}",
            )
    messages = _append(state.messages, answers, events)
    changes = {
        "messages": messages,
        "waits": state.waits + tuple(waits),
        "approvals": state.approvals + tuple(approvals),
        "outcomes": outcomes,
        "consecutive_errors": consecutive,
        "actions": (state.actions + tuple(actions))[-KEEP:],
        "results": (state.results + tuple(results))[-KEEP:],
        "tool_calls": state.tool_calls + len(outcomes),
    }
    if fatal is not None:
        stopped, more = finish(replace(state, **changes), *fatal)  # type: ignore[arg-type]
        return stopped, events + more
    if approvals:
        detail = f"waiting for a person to approve {len(approvals)} call(s)"
        if waits:
            detail += f" and for {len(waits)} background job(s)"
        stopped, more = finish(replace(state, **changes), "awaiting_approval", detail)  # type: ignore[arg-type]
        return stopped, events + more
    if waits:
        detail = f"waiting for {len(waits)} background job(s)"
        stopped, more = finish(replace(state, **changes), "awaiting_tool", detail)  # type: ignore[arg-type]
        return stopped, events + more
    return _move(state, "reflect", events, **changes)


def interrupted(state: RunState, reason: StopReason, detail: str) -> Step:
    """Stop mid-phase (wall clock, cancellation): unanswered tool calls get error results,
    so the conversation stays well-formed for any provider."""
    events: list[Event] = []
    messages = state.messages
    if state.phase == "act" and state.response is not None:
        info = tool_error_info(ToolErrorKind.CANCELLED, f"not run: {detail}")
        fill: list[Message] = [
            tool_error_result(c.id, c.name, info) for c in state.response.tool_calls
        ]
        messages = _append(messages, fill, events)
    stopped, more = finish(replace(state, messages=messages), reason, detail)
    return stopped, events + more


def reflect(state: RunState, limits: Limits, elapsed_s: float) -> Step:
    """Check the guards over the whole request: stop with the first that trips, else
    OBSERVE again (told to answer without tools once the tool calls are used up), and
    on to THINK when there is nothing to observe."""
    verdict = check_guards(
        limits=limits,
        steps=state.request_steps,
        total_tokens=state.request_tokens,
        cost_usd=state.request_cost_usd,
        elapsed_s=elapsed_s,
        consecutive_errors=state.consecutive_errors,
        actions=state.actions,
        outcomes=state.results,
    )
    if verdict is not None:
        reason, detail, guard = verdict
        return finish(state, reason, detail, guard=None if guard == reason else guard)
    cap = limits.max_tool_calls
    if cap is None or state.tool_calls < cap:
        return _observe_next(state, [])
    if not state.tool_limit_notice:
        pending = (*state.pending, tool_limit_notice(cap))
        return _move(
            state,
            "observe",
            [],
            pending=pending,
            next_tool_choice="none",
            tool_limit_notice=True,
        )
    if state.response is not None and state.response.tool_calls:
        detail = f"the model kept calling tools after its {cap} tool calls were used up"
        return finish(state, "max_steps", detail, guard="max_tool_calls")
    return _observe_next(state, [], next_tool_choice="none")


def tripped(trip: Trip) -> GuardrailTripped:
    """The audit event of a guardrail's trip."""
    return GuardrailTripped(
        guardrail=trip.guardrail,
        stage=trip.stage,
        verdict=trip.verdict,
        reason=trip.reason,
        tool=trip.tool,
        tool_call_id=trip.tool_call_id,
        excerpt=trip.excerpt,
    )


def finish(state: RunState, reason: StopReason, detail: str, *, guard: str | None = None) -> Step:
    """End the run with `reason`; `guard` names the guard behind it when that differs."""
    events: list[Event] = []
    if guard is not None or reason in GUARDS:
        events.append(GuardTriggered(guard=guard or reason, detail=detail))
    return _move(state, "done", events, stop_reason=reason, error=detail)
