"""`pi bench NAME`: benchmarks as programs (tables on screen, CSV/JSON/PNG on disk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._console import console, fail, say
from .bench_docs import bench_docs
from .bench_qrp import bench_qrp
from .bench_startup import bench_footer, bench_startup

bench_app = typer.Typer(help="Benchmarks: print a table, write CSV/JSON/PNG.", no_args_is_help=True)


@bench_app.command("loop")
def bench_loop(
    turns: Annotated[
        str, typer.Option("--turns", help="Comma-separated turn counts.")
    ] = "2,50,200,1000",
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, help="Runs per point (median kept).")
    ] = 3,
    with_peers: Annotated[
        bool,
        typer.Option("--peers/--no-peers", help="Also run PydanticAI and the OpenAI Agents SDK."),
    ] = True,
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON/PNG.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Runtime overhead per turn at 2, 50, 200 and 1000 turns, Pi vs peers (at 2 turns,
    mostly the fixed cost of a run)."""
    from ..bench.loop import measure
    from ..bench.report import plot_lines, print_table, write_files

    try:
        counts = tuple(int(t) for t in turns.split(","))
        if any(c < 2 for c in counts):
            raise ValueError
    except ValueError:
        fail(f"--turns must be integers >= 2, got {turns!r}")
    result = measure(counts, repeat=repeat, with_peers=with_peers)
    files = write_files(result, out)
    png = plot_lines(result, out, x="turns", y="per_turn_us", series="system", ylabel="µs per turn")
    result["files"] = [str(p) for p in [*files, *([png] if png else [])]]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    print_table(result, screen, "runtime overhead per turn (µs, median)")
    bench_footer(screen, result)


@bench_app.command("context")
def bench_context(
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON/PNG.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Input tokens over a 30-turn tool-heavy run: naive full history vs Pi's builder;
    and per user turn of a 5-turn session, with and without proactive compression."""
    from ..bench.context import measure
    from ..bench.report import plot_lines, print_table, write_files

    result = measure()
    files = write_files(result, out)
    png = plot_lines(
        {**result, "rows": [r for r in result["rows"] if r["case"] == "long-run"]},
        out,
        x="turn",
        y=["naive_input_tokens", "pi_input_tokens"],
        series=None,
        ylabel="input tokens per request",
        log=False,
    )
    result["files"] = [str(p) for p in [*files, *([png] if png else [])]]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    print_table(result, screen, "input tokens per request (o200k_base)")
    verdict = "meets" if result["pi_share"] <= result["target_share"] else "misses"
    say(
        screen,
        f"total: naive {result['naive_total']:,} · pi {result['pi_total']:,} · "
        f"pi/naive {result['pi_share']:.1%} ({verdict} the {result['target_share']:.0%} target) · "
        f"formula N·S + T·N(N+1)/2 ≈ {result['naive_formula_total']:,}",
    )
    session = result["session"]
    say(
        screen,
        f"session ({session['turns']} user turns, default budget of "
        f"{session['context_window']:,}): without proactive compression "
        f"{session['without_proactive_total']:,} · with {session['with_proactive_total']:,} "
        f"({session['share']:.1%})",
    )
    say(screen, "files: " + ", ".join(result["files"]))


@bench_app.command("preamble")
def bench_preamble(
    with_local: Annotated[
        bool, typer.Option("--local/--no-local", help="Also run the embedded model.")
    ] = True,
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """The ERP import of seed 000: preamble metrics with discipline and tool choice off/on."""
    from ..bench.preamble import measure
    from ..bench.report import print_table, write_files

    result = measure(with_local=with_local)
    result["files"] = [str(p) for p in write_files(result, out)]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    screen.width = max(screen.width, 160)
    print_table(
        result, screen, f"preamble before the first tool call ({result['table_rows']}-row import)"
    )
    bench_footer(screen, result)


bench_app.command("docs")(bench_docs)
bench_app.command("qrp")(bench_qrp)
bench_app.command("startup")(bench_startup)


@bench_app.command("jobs")
def bench_jobs(
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Background jobs per row.")] = 200,
    workers: Annotated[
        str, typer.Option("--workers", help="Comma-separated worker process counts.")
    ] = "1,4",
    backends: Annotated[
        str, typer.Option("--backends", help="Comma-separated: sqlite, postgresql.")
    ] = "sqlite,postgresql",
    faults: Annotated[
        bool, typer.Option("--faults/--no-faults", help="Add a pass with workers SIGKILLed.")
    ] = True,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=64, help="Slots per worker.")
    ] = 1,
    pg_url: Annotated[
        str | None,
        typer.Option("--pg-url", help="A PostgreSQL server to use (default: start a temp one)."),
    ] = None,
    history: Annotated[
        int,
        typer.Option(
            "--history",
            min=0,
            max=10_000_000,
            help="Finished sessions each row's store holds before its jobs.",
        ),
    ] = 0,
    out: Annotated[Path, typer.Option("--out", help="Directory for CSV/JSON.")] = Path(
        "bench-results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")] = False,
) -> None:
    """Async tool delivery: throughput and completion → continuation latency, with 1 and 4
    workers on SQLite and PostgreSQL, and a pass with workers SIGKILLed."""
    from ..bench.jobs import BACKENDS, measure
    from ..bench.report import print_table, write_files

    try:
        counts = tuple(int(w) for w in workers.split(","))
        names = tuple(b.strip() for b in backends.split(","))
        if any(c < 1 for c in counts) or not set(names) <= set(BACKENDS):
            raise ValueError
    except ValueError:
        fail(f"--workers takes counts >= 1 and --backends {', '.join(BACKENDS)}")
    result = measure(jobs=jobs, workers=counts, backends=names, faults=faults, pg_url=pg_url,
                     concurrency=concurrency, history=history)  # fmt: skip
    result["files"] = [str(p) for p in write_files(result, out)]
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    screen = console()
    print_table(result, screen, "async tool delivery (completion → continuation latency)")
    bench_footer(screen, result)
