"""Projections of a run (seed 000, layer three): what a person sees vs what happened.

The execution projection is every event (the trace; `pi trace show`). The user
projection keeps only what a user should read: progress metadata (which step, which
tool, did it work), at most one sentence of commentary per message, and the final answer.
Raw arguments, tool results and thinking never reach it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..messages import TextBlock, clipped
from .events import (
    ApprovalRequested,
    Event,
    GuardTriggered,
    ModelErrorEvent,
    ModelResponded,
    PlanCreated,
    PlanStepStarted,
    Replanned,
    RunFinished,
    ToolResult,
)

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of `text`, whitespace folded, at most `limit` characters."""
    folded = " ".join(text.split())
    sentence = _SENTENCE_END.split(folded, maxsplit=1)[0] if folded else ""
    return clipped(sentence, limit)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserUpdate:
    """One line of the user projection."""

    kind: Literal["progress", "commentary", "answer", "ended"]
    text: str
    step: int | None = None
    tool: str | None = None
    ok: bool | None = None


def project_for_user(event: Event) -> list[UserUpdate]:
    """The user-facing updates one event yields (most yield none)."""
    if isinstance(event, ModelResponded):
        message = event.message
        if not message.tool_calls:
            return []
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        sentence = first_sentence(text)
        return [UserUpdate(kind="commentary", text=sentence, step=event.step)] if sentence else []
    if isinstance(event, ToolResult):
        verb = "done" if not event.is_error else f"failed ({event.error_kind})"
        return [
            UserUpdate(
                kind="progress",
                text=f"{event.name}: {verb}",
                tool=event.name,
                ok=not event.is_error,
            )
        ]
    if isinstance(event, ApprovalRequested):
        text = f"{event.name}: waiting for a person's approval"
        return [UserUpdate(kind="progress", text=text, tool=event.name)]
    if isinstance(event, ModelErrorEvent) and event.retry_in_ms is not None:
        return [UserUpdate(kind="progress", text="the model is busy; retrying", ok=False)]
    if isinstance(event, PlanCreated):
        text = f"{'new plan' if event.revision else 'plan'}: {len(event.steps)} step(s)"
        return [UserUpdate(kind="progress", text=text)]
    if isinstance(event, PlanStepStarted):
        text = f"step {event.number}/{event.total}: {first_sentence(event.goal, 100)}"
        return [UserUpdate(kind="progress", text=text)]
    if isinstance(event, Replanned):
        text = f"replanning: {first_sentence(event.reason, 100)}"
        return [UserUpdate(kind="progress", text=text, ok=False)]
    if isinstance(event, GuardTriggered):
        return [UserUpdate(kind="progress", text=f"stopping: {event.detail}", ok=False)]
    if isinstance(event, RunFinished):
        updates = []
        if isinstance(event.output, str) and event.output:
            updates.append(UserUpdate(kind="answer", text=event.output))
        summary = f"{event.status} · {event.stop_reason} · {event.steps} steps"
        updates.append(UserUpdate(kind="ended", text=summary, ok=event.status == "completed"))
        return updates
    return []
