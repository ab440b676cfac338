"""`pi eval SUITE.toml`: run a suite of cases against one or more models, score each run."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..exceptions import UserError
from ._console import console, err_console, fail, say

if TYPE_CHECKING:
    from rich.console import Console


def eval_command(
    suite: Annotated[Path, typer.Argument(help="The suite file (TOML).")],
    models: Annotated[
        list[str] | None,
        typer.Option("--model", help="A model to evaluate (repeat to compare side by side)."),
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Runs of each case.")] = 1,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for JSON/CSV/PNG and traces.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Run every case of SUITE (TOML) and score it. Exit 0 all passed, 1 any failed, 2 bad
    suite or usage."""
    from ..evals import evaluate, load_suite, models_under_test
    from ..evals.report import print_report, write_report
    from ..loop import run_blocking

    err = err_console()
    try:
        loaded = load_suite(suite)
        chosen = models_under_test(loaded, models or [], Path.cwd())
    except UserError as exc:
        fail(exc)
    on_row = None if as_json else _progress(err)
    trace_dir = out / "traces" if out is not None else None
    try:
        # stdout holds the report alone: whatever tools print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            result = run_blocking(
                evaluate(loaded, chosen, repeat=repeat, trace_dir=trace_dir, on_row=on_row)
            )
    except UserError as exc:
        fail(exc)
    if out is not None:
        result["files"] = [str(p) for p in write_report(result, out)]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
    else:
        screen = console()
        screen.width = max(screen.width, 120)
        print_report(result, screen)
        if out is not None:
            say(screen, "files: " + ", ".join(result["files"]))
    raise typer.Exit(0 if result["passed"] else 1)


def _progress(err: Console) -> Any:
    def show(row: dict[str, Any]) -> None:
        verdict = ("pass", "green") if row["passed"] else ("FAIL", "red")
        say(err, verdict, f" {row['case']} [{row['model']}] ", (row["stop_reason"], "dim"))

    return show
