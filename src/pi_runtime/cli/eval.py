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
from ._stdout import json_stdout

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
    # from the first import of a tools module on, stdout may hold the report alone
    with json_stdout(as_json) as emit:
        result = _evaluated(suite, models or [], repeat=repeat, out=out, quiet=as_json)
        files = _written(result, out)
        if as_json:
            emit(json.dumps(result, ensure_ascii=False))
        else:
            _show(result)
    raise typer.Exit(0 if result["passed"] and files is not None else 1)


def _evaluated(
    suite: Path, models: list[str], *, repeat: int, out: Path | None, quiet: bool
) -> dict[str, Any]:
    """The suite's result (see `pi eval`), or exit 2 saying why the suite cannot run."""
    from ..evals import evaluate, load_suite, models_under_test
    from ..loop import run_blocking

    err = err_console()
    try:
        loaded = load_suite(suite)
        chosen = models_under_test(loaded, models, Path.cwd())
    except UserError as exc:
        fail(exc)
    on_row = None if quiet else _progress(err)
    trace_dir = out / "traces" if out is not None else None
    try:
        # stdout holds the report alone: whatever tools print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            return run_blocking(
                evaluate(loaded, chosen, repeat=repeat, trace_dir=trace_dir, on_row=on_row)
            )
    except UserError as exc:
        fail(exc)


def _written(result: dict[str, Any], out: Path | None) -> list[str] | None:
    """The report files written to `out` (also set as `result["files"]`); None, saying
    why on stderr, when they could not be written (the results are printed still)."""
    from ..evals.report import write_report

    if out is None:
        return []
    try:
        files = [str(p) for p in write_report(result, out)]
    except OSError as exc:
        say(err_console(), ("error:", "red"), f" cannot write the report to {out}: ", exc)
        return None
    result["files"] = files
    return files


def _show(result: dict[str, Any]) -> None:
    from ..evals.report import print_report

    screen = console()
    screen.width = max(screen.width, 120)
    print_report(result, screen)
    if "files" in result:
        say(screen, "files: " + ", ".join(result["files"]))


def _progress(err: Console) -> Any:
    def show(row: dict[str, Any]) -> None:
        verdict = ("pass", "green") if row["passed"] else ("FAIL", "red")
        say(err, verdict, f" {row['case']} [{row['model']}] ", (row["stop_reason"], "dim"))

    return show
