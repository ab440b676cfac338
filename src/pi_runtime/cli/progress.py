"""Progress lines for `pi run` without `--json`: the user projection of the run."""

from __future__ import annotations

from rich.console import Console

from ..observe import Event, project_for_user
from ._console import say


def render_progress(event: Event, console: Console) -> None:
    """Print the user projection of one event on the console (the answer goes to stdout)."""
    for update in project_for_user(event):
        if update.kind == "commentary":
            say(console, (f"step {update.step}", "dim"), " ", (update.text, "italic"), lines=True)
        elif update.kind == "progress":
            colour = "green" if update.ok else "yellow"
            mark = "✓" if update.ok else "·" if update.ok is None else "✗"
            say(console, "  ", (mark, colour), " ", update.text)
        elif update.kind == "ended":
            colour = "green" if update.ok else "yellow"
            say(console, (update.text, colour))
