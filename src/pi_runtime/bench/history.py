"""Finished work written straight into a bench store before its row runs.

A store in use is mostly history: sessions that ended long ago, each with its runs, its
job, the job's delivered event and the wait it resolved. `pi bench jobs --history N`
puts N such sessions in every row's store, so a row shows whether claiming and
delivering slow down as the store grows (they must not: every claim reads the claim
indexes, never the tables).

The rows are written by one statement a table, in the store's own schema, with values
no live row has (ids `h…`, a past date): nothing of the history can be claimed. They
carry no messages (their sessions say so: `message_count` 0): no claim or delivery
reads another session's messages.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from .pgtemp import connect

_PAST = "'2026-01-01 00:00:00'"
_LATER = "'2026-01-01 00:00:01'"  # the continuation, after the run it continues
_ROWS = (
    "INSERT INTO sessions (id, status, version, message_count, created_at, updated_at)"
    " SELECT 'h' || g, 'completed', 3, 0, {past}, {past} FROM {n}",
    "INSERT INTO runs (id, session_id, kind, status, stop_reason, attempts, created_at,"
    " started_at, finished_at)"
    " SELECT 'hr' || g, 'h' || g, 'user', 'awaiting', 'awaiting_tool', 1, {past}, {past},"
    " {past} FROM {n}",
    "INSERT INTO runs (id, session_id, kind, status, stop_reason, parent_run_id, attempts,"
    " created_at, started_at, finished_at)"
    " SELECT 'hc' || g, 'h' || g, 'server_result', 'completed', 'final_answer', 'hr' || g,"
    " 1, {later}, {later}, {later} FROM {n}",
    "INSERT INTO jobs (id, session_id, tool_call_id, tool, arguments, status, retry_safe,"
    " max_attempts, attempts, result, created_at, updated_at, started_at, finished_at)"
    " SELECT 'hj' || g, 'h' || g, 'c' || g, 'bench_job', '{{}}', 'succeeded', {true}, 3, 1,"
    " '{{}}', {past}, {past}, {past}, {past} FROM {n}",
    "INSERT INTO outbox (job_id, kind, payload, created_at, delivered_at, outcome, attempts)"
    " SELECT 'hj' || g, 'result', '{{}}', {past}, {past}, 'delivered', 1 FROM {n}",
    "INSERT INTO waits (session_id, tool_call_id, job_id, run_id, status, created_at,"
    " resolved_at)"
    " SELECT 'h' || g, 'c' || g, 'hj' || g, 'hr' || g, 'delivered', {past}, {past} FROM {n}",
)


def fill_history(backend: str, url: str, sessions: int) -> None:
    """Write `sessions` finished sessions into the (migrated) store at `url`."""
    if sessions <= 0:
        return
    if backend == "postgresql":
        numbers = f"generate_series(1, {int(sessions)}) AS s(g)"
        with connect(url) as conn, conn.transaction():
            for statement in _ROWS:
                conn.execute(statement.format(n=numbers, past=_PAST, later=_LATER, true="true"))
        with connect(url) as conn:
            conn.execute("ANALYZE")  # as autovacuum would soon after such a load
        return
    counted = (
        "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s "
        f"WHERE g < {int(sessions)}) "
    )
    path = url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path, isolation_level=None)) as lite:
        lite.execute("BEGIN IMMEDIATE")
        for statement in _ROWS:
            lite.execute(counted + statement.format(n="s", past=_PAST, later=_LATER, true="1"))
        lite.execute("COMMIT")
