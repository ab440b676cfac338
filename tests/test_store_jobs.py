"""Job-queue operations of the durable store on SQLite and PostgreSQL: releasing a lease,
enqueueing fenced by the run's lease, cancelling one job, claiming any work at once, and
surviving a dropped connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import PgCluster
from pi_runtime.bench.pgtemp import admin
from pi_runtime.durable import JobRecord, OutboxEvent, RunRecord, Store
from pi_runtime.messages import ToolResultMessage


def test_a_connection_the_server_dropped_is_replaced_without_an_error(
    store: Store, pg_cluster: PgCluster, db_url: str
) -> None:
    if store.backend != "postgresql":
        pytest.skip("SQLite has no server to drop connections")
    session = store.create_session("s1")
    assert store.get_session(session.id) is not None  # a pooled connection now exists
    admin(
        pg_cluster.url(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database() "
        "AND backend_type = 'client backend'",
    )
    assert store.get_session(session.id) == store.get_session(session.id)
    store.create_session("s2")


def test_claim_work_takes_events_then_runs_then_jobs(store: Store) -> None:
    session = store.create_session("s1")
    run = store.create_run(session.id, owner="user", lease_s=30)
    first = store.enqueue_job("compute", {"n": 1}, session_id=session.id, tool_call_id="c1")
    second = store.enqueue_job("compute", {"n": 2}, session_id=session.id, tool_call_id="c2")
    claimed = store.claim_work("w", lease_s=30)
    assert isinstance(claimed, JobRecord) and claimed.id == first.id
    store.complete_job(first.id, "w", {"ok": 1})
    store.finish_run(run.id, owner="user", status="awaiting", stop_reason="awaiting",
                     waits=[("c1", first.id), ("c2", second.id)])  # fmt: skip
    event = store.claim_work("w", lease_s=30)  # the event first, though a job is queued
    assert isinstance(event, OutboxEvent) and event.job_id == first.id
    store.deliver(event.id, ToolResultMessage(tool_call_id="c1", name="compute", content="1"))
    job = store.claim_work("w", lease_s=30)
    assert isinstance(job, JobRecord) and job.id == second.id
    store.complete_job(second.id, "w", {"ok": 2})
    event = store.claim_work("w", lease_s=30)
    assert isinstance(event, OutboxEvent)
    delivered = store.deliver(
        event.id, ToolResultMessage(tool_call_id="c2", name="compute", content="2")
    )
    assert delivered.continuation is not None
    continuation = store.claim_work("w", lease_s=30)
    assert isinstance(continuation, RunRecord) and continuation.id == delivered.continuation.id
    assert store.claim_work("w", lease_s=30) is None


def test_an_idle_sqlite_look_does_not_wait_for_the_write_lock(
    store_factory: Callable[..., Store], db_url: str
) -> None:
    store = store_factory(busy_timeout_s=0.2)
    if store.backend != "sqlite":
        pytest.skip("PostgreSQL claims take row locks, not a database-wide write lock")
    writer = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # someone else is writing, for a long time
        assert store.claim_work("idle-worker", lease_s=30) is None
        writer.execute("ROLLBACK")
    finally:
        writer.close()


def test_listening_workers_are_told_of_new_work(store: Store) -> None:
    watch = store.watch()
    if store.backend == "sqlite":
        assert watch is None  # SQLite workers poll (with reads only)
        return
    assert watch is not None
    try:
        assert watch.wait(0.01) is False  # listening now; nothing happened yet
        session = store.create_session("s1")
        store.get_session(session.id)
        assert watch.wait(0.05) is False  # no work was made
        run = store.create_run(session.id, owner="user", lease_s=30)
        job = store.enqueue_job("compute", {}, session_id=session.id, tool_call_id="c1")
        assert watch.wait(10) is True  # a job was queued
        store.claim_work("w", lease_s=30)
        store.complete_job(job.id, "w", {"ok": True})
        assert watch.wait(10) is True  # its outbox event was written
        store.finish_run(run.id, owner="user", status="awaiting", stop_reason="awaiting",
                         waits=[("c1", job.id)])  # fmt: skip
        assert watch.wait(10) is True  # the wait made the event claimable
    finally:
        watch.close()
