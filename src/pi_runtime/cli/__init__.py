"""The `pi` command line."""

from __future__ import annotations

import typer

from .bench import bench_app
from .run import run_command
from .trace import trace_app

app = typer.Typer(help="Pi: a guarded agent runtime.", no_args_is_help=True, add_completion=False)
app.command("run")(run_command)
app.add_typer(trace_app, name="trace")
app.add_typer(bench_app, name="bench")


def main() -> None:
    app()


__all__ = ["app", "main"]
