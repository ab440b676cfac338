"""One line per event of a run's timeline, for `pi trace show` (imported only by it)."""

from __future__ import annotations

import json
from typing import Any

from ..messages import AssistantMessage, TextBlock, ToolCall
from ..observe import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ChildRun,
    Escalated,
    Event,
    GuardrailTripped,
    GuardTriggered,
    MemoryRecalled,
    MemoryWritten,
    ModelErrorEvent,
    ModelRequested,
    ModelResponded,
    PlanCreated,
    PlanStepFinished,
    PlanStepStarted,
    Replanned,
    RouteChosen,
    RunFinished,
    RunStarted,
    SecurityAudit,
    ToolResult,
    ToolRetried,
    event_from_dict,
)


def _calls(message: AssistantMessage) -> str:
    parts = []
    for block in message.content:
        if isinstance(block, ToolCall):
            cut = " [truncated]" if block.truncated else ""
            parts.append(f"{block.name}({block.raw[:60]}){cut}")
        elif isinstance(block, TextBlock) and block.text.strip():
            parts.append(f"[{block.phase}] {' '.join(block.text.split())[:70]}")
    return "; ".join(parts)


def describe(event: Event) -> str | None:
    """One line for an event of the execution projection, None for bookkeeping events."""
    if isinstance(event, RunStarted):
        line = f"model {event.model} · tools {', '.join(event.tools) or '-'}"
        if event.parent_run_id:
            line += f" · child of {event.parent_run_id} [{event.parent_call_id}]"
        return line
    if isinstance(event, ChildRun):
        u = event.usage
        return (
            f"{event.name} [{event.tool_call_id}] → {event.run_id} {event.status} · "
            f"{event.stop_reason} · in {u.input_tokens} out {u.output_tokens} · {event.trace}"
        )
    if isinstance(event, ModelRequested):
        line = f"step {event.step}: {event.message_count} messages, tool_choice={event.tool_choice}"
        prompt = event.prompt
        if prompt.get("name") not in (None, "system"):  # a role's call in a composed run
            line += f" · prompt {prompt['name']}@{prompt.get('version')}"
        return line
    if isinstance(event, ModelResponded):
        m = event.message
        u = m.usage
        return f"{m.finish_reason} · in {u.input_tokens} out {u.output_tokens} · {event.latency_ms:.1f} ms · {_calls(m)}"
    if isinstance(event, ModelErrorEvent):
        return f"attempt {event.attempt}: {event.message}" + (
            " (transient)" if event.transient else ""
        )
    if isinstance(event, ToolResult):
        status = f"error {event.error_kind}" if event.is_error else f"ok {event.result_bytes} B"
        ran = "" if event.executed else " (refused by the gate)"
        return f"{event.name} [{event.tool_call_id}] {status}{ran} · {event.duration_ms:.1f} ms · {event.attempts} attempt(s)"
    if isinstance(event, ToolRetried):
        return f"{event.name} attempt {event.attempt} {event.error_kind}, retry in {event.retry_in_ms:.0f} ms"
    if isinstance(event, ApprovalRequested):
        return f"{event.name} [{event.tool_call_id}] waits for approval · fingerprint {event.fingerprint[:16]}"
    if isinstance(event, ApprovalGranted):
        edited = " with edited arguments" if event.edited else ""
        return f"{event.name} [{event.tool_call_id}] approved{edited}"
    if isinstance(event, ApprovalRejected):
        return f"{event.name} [{event.tool_call_id}] rejected: {event.reason[:100]}"
    if isinstance(event, GuardTriggered):
        return f"{event.guard}: {event.detail}"
    if isinstance(event, SecurityAudit):
        return f"{event.name}: {event.detail}"
    if isinstance(event, GuardrailTripped):
        where = f"{event.stage} {event.tool}" if event.tool else event.stage
        return f"{where}: {event.guardrail} {event.verdict}: {event.reason}"
    if isinstance(event, Escalated):
        said = f"error {event.error}" if event.error else json.dumps(event.value)[:100]
        return f"{event.hook}: {said}"
    if isinstance(event, MemoryRecalled | MemoryWritten):
        return _memory(event)
    plan = _plan_line(event)
    if plan is not None:
        return plan
    if isinstance(event, RunFinished):
        u = event.usage
        return (
            f"{event.status} · {event.stop_reason} · {event.steps} steps · "
            f"in {u.input_tokens} out {u.output_tokens} tokens"
            + (f" · {event.error}" if event.error else "")
        )
    return None


def _memory(event: MemoryRecalled | MemoryWritten) -> str:
    if event.error:
        return f"{event.scope} via {event.via}: failed: {event.error}"
    if isinstance(event, MemoryRecalled):
        layer = f" · {event.tokens} tokens" if event.via == "prompt" else ""
        return (
            f"{event.scope} via {event.via}: {len(event.fact_ids)} fact(s) by {event.method}{layer}"
        )
    dropped = f", {event.discarded} discarded" if event.discarded else ""
    return (
        f"{event.scope} via {event.via}: {len(event.fact_ids)} fact(s), "
        f"{len(event.known)} already known{dropped}"
    )


def _tools(tools: tuple[str, ...]) -> str:
    return ", ".join(tools) or "-"


def _plan_line(event: Event) -> str | None:
    """The line of a plan-mode or routing event (model-written goals and reasons folded)."""
    if isinstance(event, PlanCreated):
        head = f"revision {event.revision}" if event.revision else "plan"
        steps = "; ".join(
            f"{i}. {' '.join(s.goal.split())[:60]} [{_tools(s.tools)}]"
            for i, s in enumerate(event.steps, 1)
        )
        fallback = " (fallback: the planner's answer missed the contract)" if event.fallback else ""
        return f"{head}: {len(event.steps)} step(s){fallback}: {steps}"
    if isinstance(event, PlanStepStarted):
        goal = " ".join(event.goal.split())[:90]
        return f"step {event.number}/{event.total}: {goal} · tools {_tools(event.tools)}"
    if isinstance(event, PlanStepFinished):
        verdict = "done" if event.done else "not done"
        verdict += ", replan" if event.replan else ""
        judged = " (Pi's fallback verdict)" if event.fallback else ""
        return (
            f"step {event.number}: {event.outcome} in {event.model_calls} call(s) · "
            f"{verdict}{judged} · {' '.join(event.reason.split())[:90]}"
        )
    if isinstance(event, Replanned):
        return (
            f"after step {event.number} (replan {event.replans} of {event.max_replans}): "
            f"{' '.join(event.reason.split())[:90]}"
        )
    if isinstance(event, RouteChosen):
        sure = "" if event.confidence is None else f" · confidence {event.confidence:g}"
        fallback = " (fallback: the router's answer missed the contract)" if event.fallback else ""
        return f"{event.mode}{sure}{fallback}"
    return None


def typed(data: dict[str, Any]) -> Event | None:
    """The event a line spells, None for one this Pi does not know (newer, or hand-made)."""
    try:
        return event_from_dict(data)
    except ValueError:
        return None
