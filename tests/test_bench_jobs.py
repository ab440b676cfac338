"""`pi bench jobs --json` prints one object whose rows carry the fields DESIGN.md fixes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from durable_support import *  # noqa: F403  (the PostgreSQL cluster fixture)
from durable_support import PgCluster
from pi_runtime.bench.history import fill_history
from pi_runtime.durable import open_store

PI = Path(sys.executable).parent / "pi"
ROW_FIELDS = {"backend", "workers", "jobs", "jobs_per_s", "p50_ms", "p99_ms", "duplicates", "lost"}


def test_bench_jobs_json_rows_have_the_contract_fields(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(PI), "bench", "jobs", "--json", "--jobs", "6", "--workers", "1", "-c", "2",
         "--pg-url", pg_cluster.url(), "--out", str(tmp_path), "--history", "30"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bench"] == "jobs" and result["unavailable"] == {}
    assert result["settings"]["concurrency"] == 2  # slots per worker (they share claims)
    assert result["settings"]["history"] == 30  # finished sessions in each row's store
    rows = result["rows"]
    assert [(r["backend"], r["mode"], r["workers"]) for r in rows] == [
        ("sqlite", "bare", 1), ("sqlite", "bare", 2),
        ("sqlite", "clean", 1), ("sqlite", "faults", 2),
        ("postgresql", "bare", 1), ("postgresql", "bare", 2),
        ("postgresql", "clean", 1), ("postgresql", "faults", 2),
    ]  # fmt: skip
    for row in rows:
        assert set(row) >= ROW_FIELDS | {"ratio_to_bare"}
        assert (row["duplicates"], row["lost"], row["incomplete"]) == (0, 0, 0)
        assert row["jobs_per_s"] > 0
        if row["mode"] == "bare":  # the bare queue, read against itself
            assert row["jobs"] >= 6 and row["ratio_to_bare"] == 1.0
            continue
        assert row["jobs"] == 6 and row["p50_ms"] <= row["p99_ms"]
        bare = next(r for r in rows if r["mode"] == "bare" and r["backend"] == row["backend"]
                    and r["workers"] == row["workers"])  # fmt: skip
        assert row["ratio_to_bare"] == round(row["jobs_per_s"] / bare["jobs_per_s"], 4)
    assert (tmp_path / "jobs.json").exists() and (tmp_path / "jobs.csv").exists()
    # what the ratios were measured on: the SQLite library and the server's own version
    said = subprocess.run(
        [pg_cluster.bin_dir / "postgres", "--version"], capture_output=True, text=True
    ).stdout  # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    server = said.split("(PostgreSQL)")[1].split()[0]
    assert result["versions"]["sqlite"] == sqlite3.sqlite_version
    assert result["versions"]["postgresql"].split()[0] == server


def test_bench_jobs_refuses_an_unknown_backend(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(PI), "bench", "jobs", "--backends", "oracle"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "--backends" in done.stderr


def test_bench_jobs_refuses_a_negative_history(tmp_path: Path) -> None:
    refused = subprocess.run(
        [str(PI), "bench", "jobs", "--history", "-1"], capture_output=True, text=True,
        timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2 and "--history" in refused.stderr
    assert not (tmp_path / "bench-results").exists()  # nothing measured, nothing written


def test_bench_jobs_refuses_no_slots(tmp_path: Path) -> None:
    refused = subprocess.run(
        [str(PI), "bench", "jobs", "-c", "0"], capture_output=True, text=True, timeout=60,
        cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2 and "--concurrency" in refused.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_history_is_finished_work_a_store_reads_and_never_claims(
    backend: str, pg_cluster: PgCluster, tmp_path: Path
) -> None:
    schema = pg_cluster.create_schema() if backend == "postgresql" else None
    url = pg_cluster.url(schema=schema) if schema else f"sqlite:///{tmp_path / 'h.db'}"
    store = open_store(url)  # the store's own tables, then its history
    try:
        fill_history(backend, url, 0)
        assert store.get_session("h1") is None
        fill_history(backend, url, 25)
        session = store.get_session("h7")
        assert session is not None and session.status == "completed"
        assert session.message_count == len(store.load_messages("h7")) == 0
        (job,) = store.list_jobs("h7")
        assert (job.status, job.tool_call_id, job.result) == ("succeeded", "c7", {})
        runs = store.list_runs("h7")
        assert [(r.kind, r.status) for r in runs] == [
            ("user", "awaiting"),
            ("server_result", "completed"),
        ]
        assert runs[1].parent_run_id == runs[0].id
        assert len(store.list_jobs("h25")) == 1 and store.get_session("h26") is None
        assert store.claim_batch(["w/0"], lease_s=5.0, max_attempts=3) == []
    finally:
        store.close()
        if schema:
            pg_cluster.drop_schema(schema)
