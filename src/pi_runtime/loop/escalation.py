"""The `escalate` hook (seed 001 §2.1): told when a run ends `stopped` or `failed`.

It receives an `EscalationContext` (why the run ended, its messages) and may return a
JSON value (a ticket id, who was paged), kept in the trace (`escalated`) and in
`RunResult.escalation`. A hook that raises, hangs past `ESCALATE_TIMEOUT_S`, or returns
what JSON cannot spell (or more than `ESCALATION_MAX_BYTES` of it) is recorded as an
error: the run's own ending stands either way.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..guardrails import guardrail_name
from ..guardrails.chain import REASON_LIMIT, bounded
from ..messages import STOP_STATUS, Message, RunStatus, StopReason, Usage, redact
from ..observe import Escalated, Event
from ..tools.execute import in_daemon_thread
from .state import RunState

ESCALATE_TIMEOUT_S = 30.0
ESCALATION_MAX_BYTES = 8192


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationContext:
    """What an `escalate` hook is told about the run that needs a human.

    Attributes:
        status: `stopped` or `failed`.
        stop_reason: why (`max_steps`, `consecutive_errors`, `token_budget`, …).
        detail: the sentence the run ended with (`RunResult.error`).
        messages: the whole conversation, history included.
    """

    run_id: str
    session_id: str
    status: RunStatus
    stop_reason: StopReason
    detail: str | None
    messages: tuple[Message, ...]
    steps: int
    usage: Usage


EscalateHook: TypeAlias = Callable[[EscalationContext], Any | Awaitable[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalation:
    """What the hook did: its JSON `value`, or the `error` that kept it from one."""

    hook: str
    value: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"hook": self.hook, "value": self.value, "error": self.error}


async def escalate(
    hook: EscalateHook, context: EscalationContext, *, timeout_s: float | None = None
) -> Escalation:
    """Call `hook` (a plain one in a thread of its own) and keep what it returned;
    never raises but for the caller's cancellation."""
    name = guardrail_name(hook)
    limit = ESCALATE_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        async with asyncio.timeout(limit):
            if inspect.iscoroutinefunction(hook):
                value = await hook(context)
            else:
                value = await in_daemon_thread(functools.partial(hook, context))
                if inspect.isawaitable(value):
                    value = await value
    except TimeoutError:
        return Escalation(hook=name, error=f"the hook did not return within {limit:g}s")
    except Exception as exc:
        problem = f"the hook raised {type(exc).__name__}: {exc}"
        return Escalation(hook=name, error=bounded(problem, REASON_LIMIT))
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except Exception as exc:  # TypeError, ValueError, RecursionError (nested too deep)
        problem = f"the hook returned {type(value).__name__}, which is not JSON: {exc}"
        return Escalation(hook=name, error=bounded(problem, REASON_LIMIT))
    size = len(text.encode())
    if size > ESCALATION_MAX_BYTES:
        problem = f"the hook returned {size} bytes of JSON; at most {ESCALATION_MAX_BYTES} are kept"
        return Escalation(hook=name, error=problem)
    return Escalation(hook=name, value=_redacted(json.loads(text)))


def _redacted(value: Any) -> Any:
    """`value` with secrets redacted from every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {redact(k): _redacted(v) for k, v in value.items()}
    return value


async def escalate_run(
    hook: EscalateHook | None,
    state: RunState,
    emit: Callable[[Event], None],
    *,
    run_id: str,
    session_id: str,
) -> Escalation | None:
    """Tell `hook` that the run ended `stopped` or `failed`, and record what it said (an
    `escalated` event); None for a run that completed or awaits, or without a hook."""
    reason = state.stop_reason or "internal_error"
    status = STOP_STATUS[reason]
    if hook is None or status not in ("stopped", "failed"):
        return None
    context = EscalationContext(
        run_id=run_id,
        session_id=session_id,
        status=status,
        stop_reason=reason,
        detail=state.error,
        messages=state.messages,
        steps=state.steps,
        usage=state.usage,
    )
    done = await escalate(hook, context)
    emit(Escalated(hook=done.hook, value=done.value, error=done.error))
    return done
