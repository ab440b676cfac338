"""Deciding calls that wait for a person, and resuming the run they stopped.

A run that called a tool needing approval ends `awaiting_approval` with
`RunResult.pending_approvals`. A `Decision` approves one of them (optionally with
edited arguments) or rejects it with a reason. Once every pending call of the run is
decided, the run is continued like a delivered background result: a new run over the
conversation, whose trace opens with the decisions (`approval_granted`,
`approval_rejected`).

Here the decision is taken in memory, on a `RunResult`. A durable session takes it in
its store (`pi_runtime.durable.StoredSession`, any `DecisionTarget`), where it survives
processes and is taken at most once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..context import count_tokens
from ..exceptions import UserError
from ..messages import (
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolErrorKind,
    ToolResultMessage,
    Usage,
    repair_text,
    tool_error_info,
    tool_error_result,
)
from ..observe import ApprovalGranted, ApprovalRejected, Event, compute_metrics
from ..tools import Gate, PendingApproval, ToolOutcome, ToolSpec, check_edited, fingerprint
from ._mcp import allowed_with_mcp, listed
from .run_result import RunResult

if TYPE_CHECKING:
    from .agent import Agent

MAX_REASON_CHARS = 4_000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""Control characters a reason may not hold: all but tab and line breaks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A person's decision on a call waiting for approval.

    Attributes:
        call_id: the waiting call's id.
        approve: True to run it, False to reject it.
        arguments: edited arguments to run it with instead of the model's (approve only);
            checked against the tool's schema again.
        reason: why it was rejected (reject only); the model reads it.
        fingerprint: the fingerprint the person reviewed: if the waiting call's differs,
            the decision is refused.
    """

    call_id: str
    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.call_id, str) or not self.call_id:
            raise UserError(f"call_id must be a non-empty string, got {self.call_id!r}")
        if self.approve and self.reason is not None:
            raise UserError("an approval takes no reason; a rejection does")
        if not self.approve:
            if self.arguments is not None:
                raise UserError("a rejection takes no arguments; an approval may")
            reason = repair_text(self.reason).strip() if isinstance(self.reason, str) else ""
            if not reason:
                raise UserError("a rejection needs a reason (the model reads it)")
            if len(reason) > MAX_REASON_CHARS:
                raise UserError(f"the reason is longer than {MAX_REASON_CHARS} characters")
            control = _CONTROL.search(reason)
            if control is not None:  # PostgreSQL's text refuses NUL; none is meant text
                raise UserError(
                    f"the reason holds a control character (U+{ord(control.group()):04X}): "
                    "write it as plain text"
                )
            object.__setattr__(self, "reason", reason)
        if self.fingerprint is not None and not isinstance(self.fingerprint, str):
            raise UserError(f"fingerprint must be a string, got {self.fingerprint!r}")


@runtime_checkable
class DecisionTarget(Protocol):
    """Something that takes decisions for a waiting run kept elsewhere (a durable
    session: `pi_runtime.durable.StoredSession`)."""

    async def decide(self, agent: Agent, decision: Decision) -> RunResult:
        """Take `decision` and return the continued (or still awaiting) result."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """A decision checked against its waiting call: what to run, or what to answer."""

    pending: PendingApproval
    call: ToolCall
    """The call to run (approve: with the final arguments) under the original id."""
    event: ApprovalGranted | ApprovalRejected
    answer: ToolResultMessage | None = None
    """The rejection's tool error (None: approved, the tool's result answers)."""


async def check_decision(
    agent: Agent, pending: PendingApproval, decision: Decision, messages: Sequence[Message]
) -> Checked:
    """`decision` checked against `pending` and the conversation (UserError if refused):
    the call must be the model's, unchanged since it was fingerprinted, and edited
    arguments must pass the tool's schema."""
    if not pending.intact:
        raise UserError(
            f"call {pending.call_id!r}: its stored arguments no longer match their "
            "fingerprint; refusing to decide on arguments nobody reviewed"
        )
    if decision.fingerprint is not None and decision.fingerprint != pending.fingerprint:
        raise UserError(
            f"call {pending.call_id!r}: stale fingerprint: the call waiting has fingerprint "
            f"{pending.fingerprint}, not {decision.fingerprint}; review it again"
        )
    asked = _asked(messages, pending.call_id)
    if (
        asked is None
        or asked.name != pending.tool
        or await _reviewed_fingerprint(agent, asked) != pending.fingerprint
    ):
        raise UserError(
            f"call {pending.call_id!r}: the conversation's call differs from the one "
            "waiting for approval; refusing to decide on arguments nobody reviewed"
        )
    if not decision.approve:
        assert decision.reason is not None  # Decision checked it
        info = tool_error_info(
            ToolErrorKind.REJECTED, f"A person rejected this call: {decision.reason}"
        )
        return Checked(
            pending=pending,
            call=asked,
            answer=tool_error_result(pending.call_id, pending.tool, info),
            event=ApprovalRejected(
                tool_call_id=pending.call_id,
                name=pending.tool,
                fingerprint=pending.fingerprint,
                reason=decision.reason,
            ),
        )
    spec = await tool_of(agent, pending.tool)
    if spec is None:
        raise UserError(f"call {pending.call_id!r}: the agent has no tool {pending.tool!r}")
    final = pending.arguments
    if decision.arguments is not None:
        final = await _guarded_edit(agent, pending, check_edited(spec, decision.arguments))
    raw = json.dumps(final, ensure_ascii=False)
    return Checked(
        pending=pending,
        call=ToolCall(id=pending.call_id, name=pending.tool, raw=raw, arguments=final),
        event=ApprovalGranted(
            tool_call_id=pending.call_id,
            name=pending.tool,
            fingerprint=pending.fingerprint,
            arguments=final,
            edited=fingerprint(final) != pending.fingerprint,
        ),
    )


async def tools_for(agent: Agent, name: str) -> tuple[ToolSpec, ...]:
    """The tools to decide a call of tool `name` with: the agent's own, and its MCP
    servers' (listed once per agent) when `name` is not one of its own, so a decision on
    a Python tool never waits for a server. UserError when a server cannot be listed:
    its call could be neither checked nor run, so nothing is decided."""
    if any(s.name == name for s in agent.tools):
        return tuple(agent.tools)
    specs, missing = await listed(agent.mcp, agent._own_names())
    if missing is not None:
        raise UserError(f"cannot decide: {missing}")
    return (*agent.tools, *specs)


async def tool_of(agent: Agent, name: str) -> ToolSpec | None:
    return next((s for s in await tools_for(agent, name) if s.name == name), None)


async def reach_tool(agent: Agent, name: str) -> tuple[ToolSpec | None, str | None]:
    """(the agent's tool `name`, its own or its MCP servers', None), or (None, why the
    servers could not be listed — repaired and redacted), or (None, None) when they were
    listed without it."""
    own = next((s for s in agent.tools if s.name == name), None)
    if own is not None:
        return own, None
    specs, why = await listed(agent.mcp, agent._own_names())
    return next((s for s in specs if s.name == name), None), why


async def approval_gate(agent: Agent, call: ToolCall, session_id: str) -> Gate:
    """The gate an approved call runs through: the agent's own, for its session."""
    tools = await tools_for(agent, call.name)
    return Gate(
        tools,
        allow=allowed_with_mcp(agent.allow, tools[len(agent.tools) :]),
        session_id=session_id,
        retry_base_s=agent.limits.retry_base_s,
        approval=agent.approval,
    )


async def run_approved(agent: Agent, checked: Checked, session_id: str) -> ToolResultMessage:
    """Run an approved call once, through the gate (checks, idempotency key, timeout,
    retries, result encoding), and return the message answering it."""
    if checked.answer is not None:
        return checked.answer
    gate = await approval_gate(agent, checked.call, session_id)
    outcome = await gate.run(checked.call, approved=True)
    assert outcome.message is not None  # approved, and no launcher: it ran or was refused
    return outcome.message


async def decide_in_memory(agent: Agent, result: RunResult, decision: Decision) -> RunResult:
    """Take `decision` on a run kept in memory; continue it once nothing is left waiting.

    The call is claimed before anything is awaited, so of two decisions on it taken at
    once (or on copies of one result) the second is refused; a refused decision gives the
    claim back. A decision on a result that an earlier decision superseded is refused too:
    the result that decision returned is the run's state.
    """
    pending = _pending(result, decision.call_id, agent)
    key = (result.run_id, pending.call_id)
    agent._decided.add(key)  # claimed before any await: a second decision is refused
    ran = False
    try:
        checked = await check_decision(agent, pending, decision, result.messages)
        ran = checked.answer is None  # approved: from here the tool may have run
        answer = await run_approved(agent, checked, result.session_id)
    except BaseException:
        if not ran:  # nothing ran: the decision may be taken again
            agent._decided.discard(key)
        raise
    messages = (*result.messages, answer)
    # decisions taken while other calls still waited open the trace of the run that continues
    earlier = () if any(e.kind == "run_started" for e in result.events) else result.events
    prelude = (*earlier, checked.event)
    rest = tuple(p for p in result.pending_approvals if p.call_id != pending.call_id)
    if rest or result.waits:
        return still_awaiting(result, messages, rest, prelude)
    return await agent.run(None, history=messages, session_id=result.session_id, _prelude=prelude)


def still_awaiting(
    result: RunResult,
    messages: Sequence[Message],
    pending: tuple[PendingApproval, ...],
    events: Sequence[Event],
) -> RunResult:
    """The result of a decision after which the run still waits (no new run started)."""
    reason: StopReason = "awaiting_approval" if pending else "awaiting_tool"
    detail = (
        f"waiting for a person to approve {len(pending)} call(s)"
        if pending
        else f"waiting for {len(result.waits)} background job(s)"
    )
    return RunResult(
        status="awaiting",
        stop_reason=reason,
        output=None,
        steps=0,
        usage=Usage(cost_usd=0.0),
        metrics=compute_metrics((), wall_ms=0.0, count_tokens=count_tokens),
        messages=tuple(messages),
        trace=None,
        run_id=result.run_id,
        session_id=result.session_id,
        error=detail,
        waits=result.waits,
        pending_approvals=pending,
        events=tuple(events),
    )


def _pending(result: RunResult, call_id: str, agent: Agent) -> PendingApproval:
    if not isinstance(result, RunResult):
        raise UserError(
            "decide on a RunResult (in memory) or a stored session "
            f"(pi_runtime.durable.StoredSession), not {type(result).__name__}"
        )
    decided = {
        p.call_id for p in result.pending_approvals if (result.run_id, p.call_id) in agent._decided
    }
    for pending in result.pending_approvals:
        if pending.call_id == call_id:
            if call_id in decided:
                raise UserError(f"call {call_id!r} was already decided")
            if decided:
                raise UserError(
                    f"this result is out of date: call {sorted(decided)[0]!r} was decided on "
                    "it since; decide on the result that decision returned"
                )
            return pending
    answered = any(
        isinstance(m, ToolResultMessage) and m.tool_call_id == call_id for m in result.messages
    )
    if answered or (result.run_id, call_id) in agent._decided:
        raise UserError(f"call {call_id!r} was already decided")
    if result.status != "awaiting" or not result.pending_approvals:
        raise UserError(f"run {result.run_id!r} is not waiting for an approval")
    waiting = ", ".join(p.call_id for p in result.pending_approvals)
    raise UserError(f"no call {call_id!r} waits for approval; waiting: {waiting}")


def _asked(messages: Sequence[Message], call_id: str) -> ToolCall | None:
    """The model's call `call_id` in the conversation (the last one of that id)."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id == call_id:
                    return call
    return None


async def _reviewed_fingerprint(agent: Agent, call: ToolCall) -> str | None:
    """The fingerprint of the arguments the agent's gate holds `call` with for approval:
    the model's, checked against the schema and through the tool's guardrails (which may
    rewrite them); None when the gate would not hold it."""
    held = (await _screened(agent, call)).approval
    return None if held is None else held.fingerprint


async def _guarded_edit(
    agent: Agent, pending: PendingApproval, arguments: dict[str, Any]
) -> dict[str, Any]:
    """A person's edited `arguments` through the tool's guardrails, as the model's went
    before they were held: what to run (a guardrail may rewrite them), or a UserError
    saying which guardrail refused them (nothing runs, and the call still waits)."""
    raw = json.dumps(arguments, ensure_ascii=False)
    edited = ToolCall(id=pending.call_id, name=pending.tool, raw=raw, arguments=arguments)
    outcome = await _screened(agent, edited)
    if outcome.approval is None:
        error = outcome.message.error if outcome.message is not None else None
        said = error.message if error is not None else "refused"
        raise UserError(f"call {pending.call_id!r}: the edited arguments are refused: {said}")
    return outcome.approval.arguments


async def _screened(agent: Agent, call: ToolCall) -> ToolOutcome:
    """`call` through the checks of the agent's gate up to approval, and held there: its
    tool counts as needing approval whatever the policy says of these arguments, so
    nothing runs (and no session is named, so no idempotency key is made)."""
    gate = Gate(
        await tools_for(agent, call.name),
        session_id="",
        approval={*agent.approval, call.name},
        guardrails=agent.guardrails,
    )
    return await gate.run(call)
