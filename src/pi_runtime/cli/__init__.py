"""The `pi` command line."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from .approve import approve_command, reject_command
from .bench import bench_app
from .eval import eval_command
from .mcp import mcp_app
from .qrp import qrp_app
from .run import run_command
from .serve import serve_command
from .session import session_app
from .trace import trace_app
from .worker import worker_command


class _Group(TyperGroup):
    """A command group whose `--help` flag defaults to False, not None.

    Typer coerces a non-bool value through a pydantic adapter, so an absent help flag
    (None) imported pydantic on every subcommand: `pi run --help` paid for it.
    """

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


app = typer.Typer(
    help="Pi: a guarded agent runtime.", no_args_is_help=True, add_completion=False, cls=_Group
)
app.command("run")(run_command)
app.add_typer(trace_app, name="trace", cls=_Group)
app.add_typer(bench_app, name="bench", cls=_Group)
app.command("eval")(eval_command)
app.add_typer(qrp_app, name="qrp", cls=_Group)
app.command("worker")(worker_command)
app.add_typer(session_app, name="session", cls=_Group)
app.command("approve")(approve_command)
app.command("reject")(reject_command)
app.command("serve")(serve_command)
app.add_typer(mcp_app, name="mcp", cls=_Group)


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
