"""`pi trace show`: a run's timeline from its JSONL trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._console import console, fail, literal

trace_app = typer.Typer(help="Inspect run traces.", no_args_is_help=True)


def _calls(message: dict[str, Any]) -> str:
    parts = []
    for block in message.get("content", []):
        if block.get("kind") == "tool_call":
            cut = " [truncated]" if block.get("truncated") else ""
            parts.append(f"{block['name']}({block['raw'][:60]}){cut}")
        elif block.get("kind") == "text" and block.get("text", "").strip():
            parts.append(f"[{block.get('phase')}] {' '.join(block['text'].split())[:70]}")
    return "; ".join(parts)


def describe(event: dict[str, Any]) -> str | None:
    """One line for an event of the execution projection, None for bookkeeping events."""
    kind = event.get("kind")
    if kind == "run_started":
        return f"model {event['model']} · tools {', '.join(event['tools']) or '-'}"
    if kind == "model_request":
        return f"step {event['step']}: {event['message_count']} messages, tool_choice={event['tool_choice']}"
    if kind == "model_response":
        m = event["message"]
        u = m.get("usage", {})
        return f"{m.get('finish_reason')} · in {u.get('input_tokens', 0)} out {u.get('output_tokens', 0)} · {event['latency_ms']:.1f} ms · {_calls(m)}"
    if kind == "model_error":
        return f"attempt {event['attempt']}: {event['message']}" + (
            " (transient)" if event["transient"] else ""
        )
    if kind == "tool_result":
        status = (
            f"error {event['error_kind']}" if event["is_error"] else f"ok {event['result_bytes']} B"
        )
        ran = "" if event["executed"] else " (refused by the gate)"
        return f"{event['name']} [{event['tool_call_id']}] {status}{ran} · {event['duration_ms']:.1f} ms · {event['attempts']} attempt(s)"
    if kind == "tool_retry":
        return f"{event['name']} attempt {event['attempt']} {event['error_kind']}, retry in {event['retry_in_ms']:.0f} ms"
    if kind == "guard":
        return f"{event['guard']}: {event['detail']}"
    if kind == "security_audit":
        return f"{event['name']}: {event['detail']}"
    if kind == "run_finished":
        u = event["usage"]
        return (
            f"{event['status']} · {event['stop_reason']} · {event['steps']} steps · "
            f"in {u['input_tokens']} out {u['output_tokens']} tokens"
            + (f" · {event['error']}" if event.get("error") else "")
        )
    return None


def show(
    path: Annotated[Path, typer.Argument(help="A run's .jsonl trace.")],
    all_events: Annotated[
        bool, typer.Option("--all", help="Show transitions and messages too.")
    ] = False,
) -> None:
    """Render a run's timeline: steps, tool calls, errors, tokens, stop reason."""
    from rich.table import Table

    from ..observe import read_trace

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
    for event in events:
        line = describe(event)
        if line is None and all_events:
            line = str({k: v for k, v in event.items() if k not in ("kind", "seq", "t_ms")})[:120]
        if line is None:
            continue
        kind = event.get("kind", "?")
        style = styles.get(kind, "")
        if kind == "tool_result" and event.get("is_error"):
            style = "red"
        table.add_row(f"{event.get('t_ms', 0):.1f}", literal(kind), literal(line), style=style)
    console().print(table, soft_wrap=False)


trace_app.command("show")(show)
