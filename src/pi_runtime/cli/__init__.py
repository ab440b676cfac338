"""The `pi` command line."""

from __future__ import annotations

import sys

import typer

from .bench import bench_app
from .qrp import qrp_app
from .run import run_command
from .session import session_app
from .trace import trace_app
from .worker import worker_command

app = typer.Typer(help="Pi: a guarded agent runtime.", no_args_is_help=True, add_completion=False)
app.command("run")(run_command)
app.add_typer(trace_app, name="trace")
app.add_typer(bench_app, name="bench")
app.add_typer(qrp_app, name="qrp")
app.command("worker")(worker_command)
app.add_typer(session_app, name="session")


def main() -> None:
    """The `pi` console script."""
    # Undecodable bytes in argv arrive as lone surrogates (surrogateescape); they would
    # fail the first store write or print, so each becomes U+FFFD once, before parsing.
    # All-ASCII argv (the usual case) cannot hold one, and skipping the import keeps
    # `pi --help` fast.
    if not all(arg.isascii() for arg in sys.argv):
        from ..messages import repair_text

        sys.argv[:] = [repair_text(arg) for arg in sys.argv]
    app()


__all__ = ["app", "main"]
