"""`pi bench docs`: long-document QA, context tokens per question, ids vs pasted text.

The workload is the example in `examples/docs_qa` (the installed Python's pydoc, seed 003),
so the command runs from a checkout of Pi: the folder holding `examples/` must be the
current directory.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ._console import console, fail, say

EXAMPLE = "examples.docs_qa.bench"


def _example() -> Any:
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)  # the examples live beside the package, not inside it
    try:
        return importlib.import_module(EXAMPLE)
    except ModuleNotFoundError as exc:
        if exc.name not in {"examples", "examples.docs_qa", EXAMPLE}:
            raise
        fail(
            f"pi bench docs runs examples/docs_qa: run it from the Pi checkout ({exc.name} not found)"
        )


def bench_docs(
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N questions.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON/PNG.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Context tokens per question over the stdlib's pydoc: ids and pages vs pasted documents."""
    from ..bench.report import plot_bars, print_table, write_files

    result: dict[str, Any] = _example().measure(limit=limit)
    files = write_files(result, out)
    png = plot_bars(result, out, x="doc_id", y="ratio", ylabel="naive / pi context tokens")
    result["files"] = [str(p) for p in [*files, *([png] if png else [])]]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    screen.width = max(screen.width, 140)
    print_table(result, screen, "context tokens per question (o200k_base)")
    say(
        screen,
        f"{result['questions']} questions over {result['corpus_docs']} documents "
        f"({result['corpus_bytes']:,} bytes, Python {result['python']}): "
        f"pi {result['pi_tokens_per_question']:,} · naive {result['naive_tokens_per_question']:,} "
        f"tokens per question · naive/pi {result['ratio']}× · "
        f"naive calls Pi's gate refuses: {result['naive_calls_refused_by_gate']}",
    )
    say(screen, "files: " + ", ".join(result["files"]))
