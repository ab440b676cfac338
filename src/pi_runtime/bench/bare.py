"""The `bare` row of `pi bench jobs`: the simplest correct queue on the same database.

A table of `jobs` rows; `workers` processes each loop, until none is left, over the
textbook `SKIP LOCKED` queue: in one transaction, select the oldest queued row `FOR
UPDATE SKIP LOCKED` (`BEGIN IMMEDIATE` on SQLite), do its work (none here), mark it done,
commit. A row is done only once its work is: a worker that dies mid-job rolls back, and
the row is claimable again, the promise the durable rows keep too. (A single `UPDATE …
RETURNING` that marks the row done as it claims it is faster, and at most once: a crash
after it loses the job.) No leases, no outbox, no sessions: what the database itself
allows. The durable rows are read against it (`ratio_to_bare`), so a slow or busy
machine shows up in both.

Workers connect first and say `ready`; timing starts when all are told `go` and ends
at the last worker's last commit, so process start-up is not counted.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

from ..exceptions import UserError
from .pgtemp import connect

_TABLE = "pi_bench_bare"
_NEXT = f"SELECT id, payload FROM {_TABLE} WHERE status = 'queued' ORDER BY id LIMIT 1"
_PG_CLAIM = f"{_NEXT} FOR UPDATE SKIP LOCKED"
_DONE = f"UPDATE {_TABLE} SET status = 'done' WHERE id = {{}}"


def measure_bare(
    backend: str, url: str, *, jobs: int, workers: int, history: int = 0
) -> dict[str, Any]:
    """One `bare` row: `jobs` rows through `workers` processes, counted as the durable
    rows are (`duplicates`: rows claimed twice; `lost`: rows never claimed), behind
    `history` rows already done."""
    _fill(backend, url, jobs, history)
    command = [sys.executable, "-c", "from pi_runtime.bench.bare import main; main()"]
    procs = [
        subprocess.Popen(
            [*command, backend, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != b"ready":
                error = proc.stderr.read().decode(errors="replace")[-1000:] if proc.stderr else ""
                raise UserError(f"a bare queue worker did not start: {error}")
        started = time.time()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        reports = [_report(proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    claimed = [i for report in reports for i in report["ids"]]
    span = max(report["end"] for report in reports) - started
    return {
        "backend": backend,
        "mode": "bare",
        "workers": workers,
        "jobs": jobs,
        "jobs_per_s": round(len(set(claimed)) / span, 1) if span > 0 else 0.0,
        "p50_ms": None,
        "p99_ms": None,
        "duplicates": len(claimed) - len(set(claimed)),
        "lost": jobs - len(set(claimed)),
        "incomplete": 0,
        "kills": 0,
    }


def _report(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if proc.wait(timeout=120) != 0 or not line:
        error = proc.stderr.read().decode(errors="replace")[-1000:] if proc.stderr else ""
        raise UserError(f"a bare queue worker failed: {error}")
    report: dict[str, Any] = json.loads(line)
    return report


def _fill(backend: str, url: str, jobs: int, history: int) -> None:
    ddl = (
        f"CREATE TABLE {_TABLE} (id {'BIGSERIAL' if backend == 'postgresql' else 'INTEGER'} "
        "PRIMARY KEY, status TEXT NOT NULL, payload TEXT NOT NULL)"
    )
    index = f"CREATE INDEX ix_{_TABLE} ON {_TABLE} (status, id)"
    done = [("done", json.dumps({"n": -n})) for n in range(1, history + 1)]
    rows = done + [("queued", json.dumps({"n": n})) for n in range(jobs)]
    if backend == "postgresql":
        with connect(url) as conn:
            conn.execute(ddl)
            conn.execute(index)
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {_TABLE} (status, payload) VALUES (%s, %s)", rows)
            conn.execute(f"ANALYZE {_TABLE}")
        return
    with closing(_sqlite(url)) as conn:
        conn.execute(ddl)
        conn.execute(index)
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO {_TABLE} (status, payload) VALUES (?, ?)", rows)
        conn.execute("COMMIT")


def _sqlite(url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def main() -> None:
    """A worker process: `ready`, wait for `go`, claim until the queue is empty, then
    print which rows it claimed and when it finished."""
    backend, url = sys.argv[1], sys.argv[2]
    ids: list[int] = []
    claim: Callable[[], Any]
    if backend == "postgresql":
        conn = connect(url)
        done = _DONE.format("%s")

        def claim() -> Any:
            with conn.transaction():
                row = conn.execute(_PG_CLAIM).fetchone()
                if row is not None:  # (the job's work would be done here)
                    conn.execute(done, (row[0],))
            return row

    else:
        lite = _sqlite(url)
        done = _DONE.format("?")

        def claim() -> Any:
            lite.execute("BEGIN IMMEDIATE")
            row = lite.execute(_NEXT).fetchone()
            if row is not None:
                lite.execute(done, (row[0],))
            lite.execute("COMMIT")
            return row

    print("ready", flush=True)
    sys.stdin.readline()
    while (row := claim()) is not None:
        ids.append(row[0])
    print(json.dumps({"ids": ids, "end": time.time()}), flush=True)
