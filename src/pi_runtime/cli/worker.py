"""`pi worker`: run background jobs, deliver their results, run the continuations."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..exceptions import UserError
from ._console import err_console, fail, say
from .session import DbOption, open_db

if TYPE_CHECKING:
    from ..durable.worker import Worker, WorkerStats


def worker_command(
    db: DbOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Things worked on at once.")
    ] = 1,
    once: Annotated[
        bool, typer.Option("--once", help="Exit when no work is left to claim.")
    ] = False,
    lease: Annotated[
        float,
        typer.Option("--lease", min=0.1, help="Lease seconds: a dead worker's work moves after."),
    ] = 30.0,
    poll: Annotated[
        float, typer.Option("--poll", min=0.001, help="Longest pause between looks for work.")
    ] = 0.5,
    drain_timeout: Annotated[
        float, typer.Option("--drain-timeout", min=0, help="Seconds SIGTERM lets work finish.")
    ] = 20.0,
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", help="MODULE:ATTR tools for jobs whose session names none."),
    ] = None,
    results: Annotated[
        str, typer.Option("--results", help="How results reach the model: qrp1 or json.")
    ] = "qrp1",
    trace_dir: Annotated[
        Path | None, typer.Option("--trace-dir", help="Where continuation runs write traces.")
    ] = None,
    run_attempts: Annotated[
        int, typer.Option("--run-attempts", min=1, help="A run interrupted this often fails.")
    ] = 3,
    name: Annotated[str | None, typer.Option("--name", help="Lease owner name.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what it did as JSON.")] = False,
) -> None:
    """Run jobs, deliver results and run continuations until SIGTERM (or, with --once,
    until nothing is left). SIGTERM drains: current work finishes, nothing new starts."""
    # Imported here so `pi --help` does not load the store and the loop.
    from ..durable.results import ENCODERS
    from ..durable.worker import Worker
    from ..loop import run_blocking
    from .loading import load_tools

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if results not in ENCODERS:
        fail(f"--results is one of {', '.join(ENCODERS)}, not {results!r}")
    try:
        extra = [spec for ref in tools or [] for spec in load_tools(ref)]
    except UserError as exc:
        fail(exc)
    store = open_db(db)
    try:
        worker = Worker(
            store,
            concurrency=concurrency,
            lease_s=lease,
            poll_s=poll,
            drain_s=drain_timeout,
            tools=extra,
            encoder=ENCODERS[results],
            trace_dir=trace_dir,
            run_attempts=run_attempts,
            name=name,
        )
        stats = run_blocking(_serve(worker, once))
    except UserError as exc:
        fail(exc)
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({"worker": worker.name, **stats.to_dict()}))
    else:
        say(err_console(), _summary(worker.name, stats))
    raise typer.Exit(1 if stats.errors else 0)


async def _serve(worker: Worker, once: bool) -> WorkerStats:
    worker.install_signal_handlers()
    say(
        err_console(),
        f"{worker.name}: serving {worker.store.url} with {worker.concurrency} slot(s)"
        + ("" if once else "; SIGTERM drains"),
    )
    return await worker.run(once=once)


def _summary(name: str, stats: WorkerStats) -> str:
    jobs = sum(stats.jobs.values())
    runs = sum(stats.runs.values())
    d = stats.deliveries
    return (
        f"{name}: {jobs} job(s), {d['delivered']} result(s) delivered "
        f"({d['duplicate']} duplicate, {d['ignored']} ignored), {runs} run(s)"
        + (f", {stats.errors} error(s)" if stats.errors else "")
    )
