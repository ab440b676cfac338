"""`pi trace show`: a run's timeline from its JSONL trace.

Lines are read back as typed events through the one adapter that wrote them; a line this
Pi does not know (a newer kind, a hand-made trace) is still shown, as its raw fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..messages import AssistantMessage, TextBlock, ToolCall
from ..observe import (
    Event,
    GuardTriggered,
    ModelErrorEvent,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunStarted,
    SecurityAudit,
    ToolResult,
    ToolRetried,
    event_from_dict,
    read_trace,
)
from ._console import console, fail, literal

trace_app = typer.Typer(help="Inspect run traces.", no_args_is_help=True)


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
        return f"model {event.model} · tools {', '.join(event.tools) or '-'}"
    if isinstance(event, ModelRequested):
        return f"step {event.step}: {event.message_count} messages, tool_choice={event.tool_choice}"
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
    if isinstance(event, GuardTriggered):
        return f"{event.guard}: {event.detail}"
    if isinstance(event, SecurityAudit):
        return f"{event.name}: {event.detail}"
    if isinstance(event, RunFinished):
        u = event.usage
        return (
            f"{event.status} · {event.stop_reason} · {event.steps} steps · "
            f"in {u.input_tokens} out {u.output_tokens} tokens"
            + (f" · {event.error}" if event.error else "")
        )
    return None


def _typed(data: dict[str, Any]) -> Event | None:
    """The event a line spells, None for one this Pi does not know (newer, or hand-made)."""
    try:
        return event_from_dict(data)
    except ValueError:
        return None


def show(
    path: Annotated[Path, typer.Argument(help="A run's .jsonl trace.")],
    all_events: Annotated[
        bool, typer.Option("--all", help="Show transitions and messages too.")
    ] = False,
) -> None:
    """Render a run's timeline: steps, tool calls, errors, tokens, stop reason."""
    try:
        events = read_trace(path)
    except (OSError, ValueError) as exc:
        fail(f"cannot read trace {path}: {exc}")
    table = Table(title=literal(path), show_lines=False)
    table.add_column("t ms", justify="right", style="dim")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    styles = {
        "tool_result": "cyan",
        "model_error": "red",
        "guard": "yellow",
        "security_audit": "red",
        "run_finished": "bold",
    }
    for data in events:
        event = _typed(data)
        line = describe(event) if event is not None else None
        if line is None and (all_events or event is None):
            line = str({k: v for k, v in data.items() if k not in ("kind", "seq", "t_ms")})[:120]
        if line is None:
            continue
        kind = str(data.get("kind", "?"))
        style = styles.get(kind, "")
        if isinstance(event, ToolResult) and event.is_error:
            style = "red"
        t_ms = data.get("t_ms", 0)
        stamp = f"{t_ms:.1f}" if isinstance(t_ms, int | float) else "?"
        table.add_row(stamp, literal(kind), literal(line), style=style)
    console().print(table, soft_wrap=False)


trace_app.command("show")(show)
