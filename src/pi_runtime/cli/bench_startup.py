"""`pi bench startup`: cold start of `pi` against importing the peer frameworks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ._console import console, say


def bench_startup(
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, help="Fresh interpreters per system (median kept).")
    ] = 10,
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON/PNG.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Cold start of `pi --help`, `pi run --help` and `import pi_runtime` vs the peers."""
    from ..bench.report import plot_bars, print_table, write_files
    from ..bench.startup import measure

    result = measure(repeat=repeat)
    files = write_files(result, out)
    png = plot_bars(result, out, x="system", y="median_ms", ylabel="ms to start (median)")
    result["files"] = [str(p) for p in [*files, *([png] if png else [])]]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    print_table(result, screen, f"cold start (ms, median of {repeat} fresh interpreters)")
    bench_footer(screen, result)


def bench_footer(screen: Console, result: dict[str, Any]) -> None:
    """Under a bench's table: what was not measured and why, what it was measured
    against (`versions`), and the files written."""
    for name, hint in result["unavailable"].items():
        say(screen, (f"{name} not measured", "yellow"), ": ", hint)
    ran_on = result.get("versions") or {}
    if ran_on:
        say(screen, "measured with " + ", ".join(f"{k} {v}" for k, v in ran_on.items()))
    say(screen, "files: " + ", ".join(result["files"]))
