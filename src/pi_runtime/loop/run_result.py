"""`RunResult`: how every run ends, in the JSON shape other programs rely on."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..messages import (
    STOP_STATUS,
    AssistantMessage,
    Message,
    RunStatus,
    StopReason,
    ToolErrorKind,
    ToolResultMessage,
    Usage,
    messages_to_list,
    tool_error_info,
    tool_error_result,
)
from ..observe import Event
from ..tools import PendingApproval
from .escalation import Escalation

UsageSource: TypeAlias = Literal["provider", "counted", "mixed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """The outcome of a run: why it stopped, what it produced, and its whole record.

    Attributes:
        status: `completed`, `stopped` (a guard), `failed` or `awaiting`.
        stop_reason: the precise reason (`final_answer`, `max_steps`, `model_error`, …).
        output: the final answer text (or contract object); None if the run gave none.
        steps: model calls made by this run (a continuation counts its own; the guards
            count the whole request).
        usage: tokens used by all model calls of the run, and their cost in US dollars
            (`cost_usd`: None when any call's price is unknown).
        usage_source: where `usage` comes from: `provider` (as reported), `counted`
            (Pi's own count, for every call: the provider reported none) or `mixed`.
        metrics: the run's metrics (seed 000 and totals).
        messages: the whole conversation, tool results with their `tool_call_id`.
        trace: path of the JSONL trace, if one was written.
        error: a sentence on what stopped the run, when it did not complete.
        events: every event of the run, in order.
    """

    status: RunStatus
    stop_reason: StopReason
    output: Any
    steps: int
    usage: Usage
    metrics: dict[str, Any]
    messages: tuple[Message, ...]
    trace: str | None
    run_id: str
    session_id: str
    error: str | None = None
    waits: tuple[tuple[str, str], ...] = ()
    """(tool_call_id, job_id) of the background jobs an `awaiting` run waits for."""
    pending_approvals: tuple[PendingApproval, ...] = ()
    """The calls an `awaiting_approval` run waits for a person to approve or reject."""
    contract_errors: tuple[str, ...] = ()
    """Why the last answer missed the output contract (`contract_violation`)."""
    usage_source: UsageSource = "provider"
    events: tuple[Event, ...] = field(default=(), repr=False)
    escalation: Escalation | None = None
    """What the `escalate` hook returned (or the error it met) when the run ended
    `stopped` or `failed` with one set; None otherwise."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """The `RunResult` JSON of the `pi run --json` contract."""
        return {
            "status": self.status,
            "stop_reason": self.stop_reason,
            "output": self.output,
            "steps": self.steps,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cached_tokens": self.usage.cached_tokens,
                "cost_usd": self.usage.cost_usd,
                "source": self.usage_source,
            },
            "metrics": self.metrics,
            "messages": messages_to_list(self.messages),
            "trace": self.trace,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "error": self.error,
            "contract_errors": list(self.contract_errors),
            "waits": [{"tool_call_id": c, "job_id": j} for c, j in self.waits],
            "pending_approvals": [p.to_dict() for p in self.pending_approvals],
            "escalation": None if self.escalation is None else self.escalation.to_dict(),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)


def status_of(reason: StopReason) -> RunStatus:
    return STOP_STATUS[reason]


def usage_source(events: Iterable[Event]) -> UsageSource:
    """`provider` or `counted` when every answered model call says so, else `mixed`.

    A run without an answered call has no usage to vouch for: `provider` (all zeros).
    """
    sources = {e.usage_source for e in events if e.kind == "model_response"}
    if len(sources) > 1:
        return "mixed"
    return "counted" if sources == {"counted"} else "provider"


def unanswered(result: RunResult, new: Sequence[Message]) -> list[Message]:
    """Answers for the tool calls among `new` that `result`'s run ended without answering,
    unless it awaits them (a cancel, a fatal error in the same batch, a crash inside Pi):
    the conversation stays well-formed for any provider, and nothing is delivered to
    those calls later."""
    if result.status == "awaiting":
        return []
    answered = {m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)}
    info = tool_error_info(ToolErrorKind.CANCELLED, "the run stopped before this call got a result")
    return [
        tool_error_result(call.id, call.name, info)
        for m in new
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls
        if call.id not in answered
    ]
