"""`pi trace show`: a run's timeline from its JSONL trace.

Lines are read back as typed events through the one adapter that wrote them; a line this
Pi does not know (a newer kind, a hand-made trace) is still shown, as its raw fields.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from ._console import console, fail, literal

trace_app = typer.Typer(help="Inspect run traces.", no_args_is_help=True)


def show(
    path: Annotated[Path, typer.Argument(help="A run's .jsonl trace.")],
    all_events: Annotated[
        bool, typer.Option("--all", help="Show transitions and messages too.")
    ] = False,
) -> None:
    """Render a run's timeline: steps, tool calls, errors, tokens, stop reason."""
    from rich.table import Table

    from ..observe import ToolResult, read_trace
    from ._timeline import describe, typed

    try:
        events = read_trace(path)
    except OSError as exc:  # its reason alone: the path is said once, here
        fail(f"cannot read trace {path}: {exc.strerror or exc}")
    except ValueError as exc:  # names the file and the line itself
        fail(f"cannot read trace: {exc}")
    table = Table(title=literal(path), show_lines=False)
    table.add_column("t ms", justify="right", style="dim")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    styles = {
        "tool_result": "cyan",
        "model_error": "red",
        "guard": "yellow",
        "security_audit": "red",
        "approval_requested": "yellow",
        "approval_rejected": "yellow",
        "guardrail_tripped": "red",
        "escalated": "yellow",
        "run_finished": "bold",
        "plan_created": "magenta",
        "replanned": "magenta",
        "route_chosen": "magenta",
    }
    for data in events:
        event = typed(data)
        line = describe(event) if event is not None else None
        if line is None and (all_events or event is None):
            line = str({k: v for k, v in data.items() if k not in ("kind", "seq", "t_ms")})[:120]
        if line is None:
            continue
        kind = str(data.get("kind", "?"))
        style = styles.get(kind, "")
        if isinstance(event, ToolResult) and event.is_error:
            style = "red"
        table.add_row(_stamp(data.get("t_ms", 0)), literal(kind), literal(line), style=style)
    console().print(table, soft_wrap=False)


def _stamp(t_ms: object) -> str:
    """A line's time as the table shows it: `?` unless it is a finite number of ms (a
    hand-made line may hold an integer no float holds, or NaN)."""
    if isinstance(t_ms, bool) or not isinstance(t_ms, int | float):
        return "?"
    try:
        value = float(t_ms)
    except OverflowError:
        return "?"
    return f"{value:.1f}" if math.isfinite(value) else "?"


trace_app.command("show")(show)
