"""Progress lines for `pi run` without `--json`: what a user watching the run needs."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..observe import Event, GuardTriggered, ModelFailed, ModelResponded, RunFinished, ToolFinished


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_progress(event: Event, console: Console) -> None:
    """Print one line for the events a person cares about; ignore the rest."""
    if isinstance(event, ModelResponded):
        message = event.message
        for call in message.tool_calls:
            mark = " [yellow](truncated)[/]" if call.truncated else ""
            console.print(
                f"[dim]step {event.step}[/] → [cyan]{escape(call.name)}[/]({escape(_short(call.raw, 60))}){mark}"
            )
        if message.tool_calls and message.text.strip():
            console.print(f"[dim]step {event.step}[/]   [italic]{escape(_short(message.text))}[/]")
    elif isinstance(event, ToolFinished):
        if event.is_error:
            console.print(
                f"         [red]✗ {escape(event.name)}: {escape(event.error_kind or 'error')}[/]"
            )
        else:
            console.print(
                f"         [green]✓ {escape(event.name)}[/] [dim]{event.duration_ms:.0f} ms, {event.result_bytes} B[/]"
            )
    elif isinstance(event, ModelFailed):
        retry = f", retrying in {event.retry_in_ms:.0f} ms" if event.retry_in_ms is not None else ""
        console.print(f"[red]model error[/] {escape(_short(event.message))}{retry}")
    elif isinstance(event, GuardTriggered):
        console.print(f"[yellow]guard {event.guard}[/]: {escape(event.detail)}")
    elif isinstance(event, RunFinished):
        tokens = event.usage.input_tokens + event.usage.output_tokens
        colour = (
            "green"
            if event.status == "completed"
            else "yellow"
            if event.status == "stopped"
            else "red"
        )
        console.print(
            f"[{colour}]{event.status}[/] · {event.stop_reason} · {event.steps} steps · "
            f"{tokens} tokens · {event.wall_ms:.0f} ms"
        )
