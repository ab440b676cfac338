"""`pi bench jobs`: async tool delivery through real `pi worker` processes (seed 004).

Each row: `jobs` sessions each end `awaiting` one background job; then `workers` worker
processes run the jobs, deliver the results and run the continuations. Measured from the
store's own timestamps (worker start-up is not counted):

- `jobs_per_s`: jobs / (last continuation finished − first job started);
- `p50_ms` / `p99_ms`: completion → continuation latency, from a job finishing to the
  `server_result` run that continues its session starting;
- `duplicates`: tool calls answered more than once plus runs continued more than once;
  `lost`: awaited calls never answered. Both must be 0.

- `ratio_to_bare`: `jobs_per_s` as a share of the `bare` row's with as many workers: the
  simplest correct queue (`bench/bare.py`) on the same database, in the same run, so a
  slow or busy machine slows both.

`history`: finished sessions each row's store already holds (`bench/history.py`): a
store in use is mostly history, and claiming must not slow down as it grows.

The fault pass (`mode: faults`) does the same while SIGKILLing a random worker every
fraction of a second and starting a new one; a killed worker's leases expire and others
take over. Jobs do no work of their own, so the kills land in claiming and delivery.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..durable import SessionStore, TurnStore, open_store
from ..durable.recipe import Recipe
from ..durable.records import JobRecord, RunRecord
from ..durable.sessions import open_session, run_turn
from ..exceptions import UserError
from ..messages import AssistantMessage, ToolResultMessage
from ..tools import tool
from .bare import measure_bare
from .history import fill_history
from .pgtemp import TempPostgres, admin, with_schema
from .versions import versions

BACKENDS = ("sqlite", "postgresql")
_KILL_EVERY_S = (0.5, 1.5)  # a random worker is SIGKILLed this often in the fault pass
_BARE_JOBS = 2000  # the bare queue is fast: fewer rows would time mostly start-up
_TOOLS_REF = "pi_runtime.bench.jobs:BENCH_TOOLS"
_SCRIPT = {
    "steps": [
        {"tool_calls": [{"name": "bench_job", "arguments": {"n": 0}}]},
        {"text": "done"},
    ]
}


@tool(background=True)
def bench_job(n: int) -> dict[str, int]:
    """A background job that does no work of its own: what is measured is the machinery."""
    return {"n": n, "square": n * n}


BENCH_TOOLS = [bench_job]


def measure(
    *,
    jobs: int = 200,
    workers: tuple[int, ...] = (1, 4),
    backends: tuple[str, ...] = BACKENDS,
    faults: bool = True,
    pg_url: str | None = None,
    concurrency: int = 1,
    lease_s: float = 2.0,
    timeout_s: float = 180.0,
    history: int = 0,
) -> dict[str, Any]:
    """Run every row; a backend that cannot be reached is listed under `unavailable`."""
    rows: list[dict[str, Any]] = []
    unavailable: dict[str, str] = {}
    ran_on = versions()
    with tempfile.TemporaryDirectory(prefix="pi-bench-jobs-") as tmp:
        root = Path(tmp)
        script = root / "script.json"
        script.write_text(json.dumps(_SCRIPT), encoding="utf-8")
        for backend in backends:
            try:
                with _databases(backend, root, pg_url) as fresh:
                    ran_on[backend] = _server_version(backend, fresh())
                    plan = [(n, False) for n in workers]
                    if faults:
                        plan.append((max(max(workers), 2), True))
                    bare = {
                        count: measure_bare(backend, fresh(), jobs=max(jobs, _BARE_JOBS),
                                            workers=count, history=history)
                        for count in sorted({count for count, _ in plan})
                    }  # fmt: skip
                    rows.extend(bare.values())
                    for count, kill in plan:
                        row = _row(backend, fresh(), script, root, jobs, count, kill,
                                   concurrency=concurrency, lease_s=lease_s,
                                   timeout_s=timeout_s, history=history)  # fmt: skip
                        rows.append(row)
                    for row in rows:
                        if row["backend"] == backend:
                            row["ratio_to_bare"] = _ratio(row, bare[row["workers"]])
            except UserError as exc:
                unavailable[backend] = str(exc)
    return {
        "bench": "jobs",
        "rows": rows,
        "unavailable": unavailable,
        "settings": {
            "jobs": jobs,
            "concurrency": concurrency,
            "lease_s": lease_s,
            "history": history,
        },
        "versions": ran_on,
    }


def _server_version(backend: str, url: str) -> str:
    """The database's own version: SQLite's library, or what the PostgreSQL server says."""
    if backend == "sqlite":
        return sqlite3.sqlite_version
    return str(admin(url, "SHOW server_version"))


@contextmanager
def _databases(backend: str, root: Path, pg_url: str | None) -> Iterator[Any]:
    """Yields a function making a fresh, empty database URL for each row."""
    if backend == "sqlite":
        counter = iter(range(1_000_000))
        yield lambda: f"sqlite:///{root / f'bench-{next(counter)}.db'}"
        return
    if backend != "postgresql":
        raise UserError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
    if pg_url is not None:
        made: list[str] = []

        def fresh() -> str:
            made.append(f"pi_bench_{time.time_ns()}")
            admin(pg_url, f'CREATE SCHEMA "{made[-1]}"')
            return with_schema(pg_url, made[-1])

        try:
            yield fresh
        finally:
            for name in made:  # the server is someone else's: leave it as it was
                admin(pg_url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        return
    with TempPostgres() as server:
        yield lambda: server.url(server.create_schema())


def _row(
    backend: str,
    url: str,
    script: Path,
    root: Path,
    jobs: int,
    workers: int,
    kill: bool,
    *,
    concurrency: int,
    lease_s: float,
    timeout_s: float,
    history: int,
) -> dict[str, Any]:
    store = open_store(url)
    try:
        fill_history(backend, url, history)
        sessions = asyncio.run(_awaiting_sessions(store, script, jobs))
        pool = _Pool(url, root, workers, concurrency=concurrency, lease_s=lease_s)
        kills = 0
        try:
            deadline = time.monotonic() + timeout_s
            ready = pool.wait_ready(deadline)
            pending = list(sessions)
            rng = random.Random(7)
            next_kill = time.monotonic() + rng.uniform(*_KILL_EVERY_S)
            while pending and time.monotonic() < deadline:
                if kill and time.monotonic() >= next_kill:
                    pool.kill_one(rng)
                    kills += 1
                    next_kill = time.monotonic() + rng.uniform(*_KILL_EVERY_S)
                pending = _unfinished(store, pending)
                time.sleep(0.05)
        finally:
            pool.close()
        return {
            "backend": backend,
            "mode": "faults" if kill else "clean",
            "workers": workers,
            "jobs": jobs,
            **_tally(store, sessions, ready),
            "kills": kills,
        }
    finally:
        store.close()


async def _awaiting_sessions(store: TurnStore, script: Path, count: int) -> list[str]:
    """`count` sessions, each ended awaiting one background job."""
    recipe = Recipe(model=f"scripted:{script}", tools=(_TOOLS_REF,), job_max_attempts=50)
    agent = recipe.build_agent(trace_dir=False)
    ids = []
    for i in range(count):
        session, _ = open_session(store, f"bench-{i}", recipe)
        turn = await run_turn(store, session.id, f"job {i}", agent=agent, owner="bench")
        assert turn.result.status == "awaiting", turn.result.error
        ids.append(session.id)
    return ids


def _unfinished(store: SessionStore, pending: list[str], look: int = 8) -> list[str]:
    """`pending` without the sessions found completed (looks until `look` are not)."""
    left: list[str] = []
    for i, session_id in enumerate(pending):
        if len(left) >= look:
            return left + pending[i:]
        session = store.get_session(session_id)
        if session is None or session.status != "completed":
            left.append(session_id)
    return left


def _tally(store: TurnStore, sessions: list[str], since: datetime) -> dict[str, Any]:
    """Counts over every session; speed over the jobs that finished once all workers
    were up (a worker that starts early must not make the others look faster). When the
    workers were so quick that every job finished before all were seen up, the speed is
    taken from the first job's start instead."""
    done: list[tuple[JobRecord, RunRecord]] = []
    duplicates = lost = incomplete = 0
    for session_id in sessions:
        messages = [m.message for m in store.load_messages(session_id)]
        calls = {
            call.id for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls
        }
        answers = Counter(m.tool_call_id for m in messages if isinstance(m, ToolResultMessage))
        duplicates += sum(n - 1 for n in answers.values() if n > 1)
        lost += len(calls - set(answers))
        runs = store.list_runs(session_id)
        parents = Counter(r.parent_run_id for r in runs if r.parent_run_id)
        duplicates += sum(n - 1 for n in parents.values() if n > 1)
        session = store.get_session(session_id)
        incomplete += session is None or session.status != "completed"
        (job,) = store.list_jobs(session_id)
        after = next((r for r in runs if r.kind == "server_result"), None)
        if job.finished_at is not None and after is not None:
            done.append((job, after))
    counted = [(j, a) for j, a in done if j.finished_at is not None and j.finished_at >= since]
    if not counted and done:
        starts = [j.started_at for j, _ in done if j.started_at is not None]
        since = min(starts) if starts else since
        counted = done
    latencies: list[float] = []
    last_finish = since
    for job, after in counted:
        assert job.finished_at is not None
        if after.started_at is not None:
            latencies.append((after.started_at - job.finished_at).total_seconds() * 1000)
        if after.finished_at is not None:
            last_finish = max(last_finish, after.finished_at)
    span = (last_finish - since).total_seconds()
    return {
        "jobs_per_s": round(len(latencies) / span, 1) if span > 0 else 0.0,
        "p50_ms": _percentile(latencies, 50),
        "p99_ms": _percentile(latencies, 99),
        "duplicates": duplicates,
        "lost": lost,
        "incomplete": incomplete,
    }


def _ratio(row: dict[str, Any], bare: dict[str, Any]) -> float | None:
    """`row`'s throughput as a share of the bare queue's with as many workers."""
    speed, base = float(row["jobs_per_s"]), float(bare["jobs_per_s"])
    return round(speed / base, 4) if base > 0 else None


def _percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile, None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return round(ordered[rank - 1], 2)


class _Pool:
    """`pi worker` processes on one store, each logging to a file of its own."""

    def __init__(
        self, url: str, root: Path, size: int, *, concurrency: int, lease_s: float
    ) -> None:
        self._command = [
            sys.executable, "-c", "from pi_runtime.cli import main; main()", "worker",
            "--db", url, "--concurrency", str(concurrency), "--lease", str(lease_s),
            "--poll", "0.02", "--trace-dir", str(root / "traces"), "--drain-timeout", "5",
            "--run-attempts", "50",
        ]  # fmt: skip
        self._root = root
        self._started = 0
        self.procs = [self._start() for _ in range(size)]

    def _start(self) -> subprocess.Popen[bytes]:
        self._started += 1
        log = (self._root / f"worker-{self._started}.log").open("wb")
        with log:
            return subprocess.Popen(
                self._command, stdout=subprocess.DEVNULL, stderr=log, cwd=self._root
            )

    def wait_ready(self, deadline: float) -> datetime:
        """When every first worker said it is serving (they start at once)."""
        logs = [self._root / f"worker-{i + 1}.log" for i in range(len(self.procs))]
        while time.monotonic() < deadline:
            if all(b"serving" in log.read_bytes() for log in logs):
                return datetime.now(UTC)
            if any(p.poll() is not None for p in self.procs):
                tail = logs[0].read_text(errors="replace")[-1000:]
                raise UserError(f"a worker exited at start: {tail}")
            time.sleep(0.02)
        raise UserError("the workers did not start in time")

    def kill_one(self, rng: random.Random) -> None:
        index = rng.randrange(len(self.procs))
        self.procs[index].send_signal(signal.SIGKILL)
        self.procs[index].wait()
        self.procs[index] = self._start()

    def close(self) -> None:
        for proc in self.procs:
            with suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
