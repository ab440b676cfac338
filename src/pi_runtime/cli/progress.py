"""Progress lines for `pi run` without `--json`: the user projection of the run."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..observe import Event, project_for_user


def render_progress(event: Event, console: Console) -> None:
    """Print the user projection of one event on the console (the answer goes to stdout)."""
    for update in project_for_user(event):
        if update.kind == "commentary":
            console.print(f"[dim]step {update.step}[/] [italic]{escape(update.text)}[/]")
        elif update.kind == "progress":
            colour = "green" if update.ok else "yellow"
            mark = "✓" if update.ok else "·" if update.ok is None else "✗"
            console.print(f"  [{colour}]{mark}[/] {escape(update.text)}")
        elif update.kind == "ended":
            colour = "green" if update.ok else "yellow"
            console.print(f"[{colour}]{escape(update.text)}[/]")
