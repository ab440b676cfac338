"""Job-queue operations of the durable store on SQLite and PostgreSQL: releasing a lease,
enqueueing fenced by the run's lease, cancelling one job, claiming any work at once, and
surviving a dropped connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock, PgCluster
from pi_runtime.bench.pgtemp import admin
from pi_runtime.durable import (
    JobRecord,
    LeaseLost,
    NotFound,
    OutboxEvent,
    RunRecord,
    Store,
    StoreUnavailable,
)
from pi_runtime.exceptions import UserError
from pi_runtime.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage


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


@contextmanager
def someone_writing(db_url: str) -> Iterator[None]:
    """Another connection holds the SQLite write lock for as long as the block runs."""
    writer = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        yield
        writer.execute("ROLLBACK")
    finally:
        writer.close()


@pytest.fixture
def impatient_sqlite(store_factory: Callable[..., Store]) -> Store:
    """A SQLite store that waits 0.2 s for the write lock (PostgreSQL has no database-wide
    write lock: its claims take row locks)."""
    store = store_factory(busy_timeout_s=0.2)
    if store.backend != "sqlite":
        pytest.skip("PostgreSQL has no database-wide write lock")
    return store


def test_an_idle_sqlite_look_does_not_wait_for_the_write_lock(
    impatient_sqlite: Store, db_url: str
) -> None:
    with someone_writing(db_url):
        assert impatient_sqlite.claim_work("idle-worker", lease_s=30) is None


def test_a_write_that_cannot_get_the_sqlite_lock_in_time_fails_as_unavailable(
    impatient_sqlite: Store, db_url: str
) -> None:
    with someone_writing(db_url), pytest.raises(StoreUnavailable, match="locked"):
        impatient_sqlite.create_session("s1")
    assert impatient_sqlite.create_session("s1").id == "s1"  # nothing half-done stands in the way


def test_a_sqlite_write_holds_the_write_lock_from_its_start_and_a_read_does_not(
    impatient_sqlite: Store, db_url: str
) -> None:
    # writers take turns from their first statement (BEGIN IMMEDIATE), so two never
    # both read and then race to write; a read (BEGIN DEFERRED) keeps no writer waiting
    def another_writer_gets_in() -> bool:
        other = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None,
                                timeout=0)  # fmt: skip
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return False
        finally:
            other.close()

    do = impatient_sqlite._do  # type: ignore[attr-defined]
    assert do(lambda tx: another_writer_gets_in()) is False
    assert do(lambda tx: another_writer_gets_in(), read=True) is True
    assert another_writer_gets_in()  # and each transaction ended


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


def test_a_released_job_is_taken_over_at_once_and_its_holder_fenced(
    store: Store, clock: FakeClock
) -> None:
    job = store.enqueue_job("compute", {"n": 1})
    assert store.claim_job("a", lease_s=300) is not None
    with pytest.raises(LeaseLost):
        store.release_job(job.id, "b")  # only the holder releases
    assert store.claim_job("b", lease_s=300) is None  # still held
    store.release_job(job.id, "a")
    # a checkpoint of the cut-short attempt, landing late, cannot take the lease back
    with pytest.raises(LeaseLost):
        store.checkpoint_job(job.id, "a", {"day": 3}, lease_s=300)
    with pytest.raises(LeaseLost):
        store.renew_job_lease(job.id, "a", lease_s=300)
    given_back = store.get_job(job.id)
    assert given_back is not None and given_back.lease_owner is None
    taken = store.claim_work("b", lease_s=300)  # no wait for the lease to run out
    assert isinstance(taken, JobRecord) and taken.lease_owner == "b" and taken.attempts == 2
    with pytest.raises(LeaseLost):
        store.complete_job(job.id, "a", {"late": True})
    store.complete_job(job.id, "b", {"ok": True})


def test_a_released_run_is_taken_over_at_once_and_its_holder_fenced(store: Store) -> None:
    session = store.create_session("s1")
    run = store.create_run(session.id, owner="a", lease_s=300)
    with pytest.raises(LeaseLost):
        store.release_run(run.id, "b")
    assert store.claim_run("b", lease_s=300) is None
    store.release_run(run.id, "a")
    with pytest.raises(LeaseLost):  # a renewal of the cut-short run, landing late
        store.renew_run_lease(run.id, "a", lease_s=300)
    taken = store.claim_work("b", lease_s=300)
    assert isinstance(taken, RunRecord) and taken.id == run.id and taken.lease_owner == "b"
    with pytest.raises(LeaseLost):
        store.finish_run(run.id, owner="a", status="completed", stop_reason="end_turn")


def test_enqueue_fenced_by_a_lost_run_lease_writes_no_job(store: Store, clock: FakeClock) -> None:
    session = store.create_session("s1")
    run = store.create_run(session.id, owner="a", lease_s=10)
    clock.advance(11)
    assert store.claim_run("b", lease_s=10) is not None  # "a" died, as far as anyone knows
    with pytest.raises(LeaseLost):
        store.enqueue_job("compute", {}, session_id=session.id, tool_call_id="c1",
                          run_id=run.id, owner="a")  # fmt: skip
    assert store.list_jobs(session.id) == []
    job = store.enqueue_job("compute", {}, session_id=session.id, tool_call_id="c1",
                            run_id=run.id, owner="b", lease_s=50)  # fmt: skip
    assert [j.id for j in store.list_jobs(session.id)] == [job.id]
    clock.advance(20)  # the enqueue renewed b's lease: nobody can take the run now
    assert store.claim_run("c", lease_s=10) is None


def test_enqueue_fenced_by_a_run_checks_its_arguments(store: Store) -> None:
    session = store.create_session("s1")
    other = store.create_session("s2")
    run = store.create_run(session.id, owner="a", lease_s=10)
    with pytest.raises(UserError, match="run_id, owner and session_id"):
        store.enqueue_job("compute", {}, run_id=run.id, owner="a")
    with pytest.raises(UserError, match="not of session"):
        store.enqueue_job("compute", {}, session_id=other.id, tool_call_id="c1",
                          run_id=run.id, owner="a")  # fmt: skip
    assert store.list_jobs(other.id) == []


def test_cancel_job_ends_a_queued_or_running_job_and_fences_its_worker(store: Store) -> None:
    running = store.enqueue_job("compute", {"n": 1})
    queued = store.enqueue_job("compute", {"n": 2})
    done = store.enqueue_job("compute", {"n": 3})
    assert store.claim_job("w", lease_s=300).id == running.id  # type: ignore[union-attr]
    assert store.claim_job("w", lease_s=300).id == queued.id  # type: ignore[union-attr]
    store.release_job(queued.id, "w")
    assert store.claim_job("v", lease_s=300).id == queued.id  # type: ignore[union-attr]
    assert store.claim_job("w", lease_s=300).id == done.id  # type: ignore[union-attr]
    store.complete_job(done.id, "w", {"ok": True})
    for job in (running, queued):
        cancelled = store.cancel_job(job.id)
        assert cancelled.status == "cancelled" and cancelled.error is not None
        assert cancelled.error["kind"] == "cancelled"
    with pytest.raises(LeaseLost):
        store.renew_job_lease(running.id, "w")  # its worker stops at its next heartbeat
    with pytest.raises(LeaseLost):
        store.complete_job(running.id, "w", {"late": True})
    assert store.get_job(running.id).status == "cancelled"  # type: ignore[union-attr]
    assert store.cancel_job(done.id).status == "succeeded"  # finished: left as it is
    assert store.claim_work("x", lease_s=300) is None
    with pytest.raises(NotFound):
        store.cancel_job("job-nope")


def test_a_run_that_fails_cancels_the_jobs_it_launched(store: Store) -> None:
    session = store.create_session("s1")
    run = store.create_run(session.id, owner="a", lease_s=300)
    launched = [
        store.enqueue_job(
            "compute",
            {"n": n},
            session_id=session.id,
            tool_call_id=f"c{n}",
            run_id=run.id,
            owner="a",
        )
        for n in (1, 2, 3)
    ]
    store.claim_job("w", lease_s=300)  # c1 is running
    store.claim_job("w", lease_s=300)
    store.complete_job(launched[1].id, "w", {"ok": True})  # c2 finished
    calls = tuple(ToolCall(id=f"c{n}", name="compute", raw="{}", arguments={}) for n in (1, 2, 3))
    finished = store.finish_run(
        run.id, owner="a", status="failed", stop_reason="internal_error",
        messages=[UserMessage(content="go"),
                  AssistantMessage(content=calls, finish_reason="tool_calls")],
    )  # fmt: skip
    assert set(finished.jobs_cancelled) == {launched[0].id, launched[2].id}
    statuses = {job.tool_call_id: job.status for job in store.list_jobs(session.id)}
    assert statuses == {"c1": "cancelled", "c2": "succeeded", "c3": "cancelled"}
    with pytest.raises(LeaseLost):
        store.complete_job(launched[0].id, "w", {"late": True})
    assert store.claim_work("x", lease_s=300) is None  # nothing runs for the failed run


def test_the_delivering_worker_may_take_the_continuation_it_queues(store: Store) -> None:
    session = store.create_session("s1")
    run = store.create_run(session.id, owner="user", lease_s=300)
    job = store.enqueue_job("compute", {}, session_id=session.id, tool_call_id="c1")
    store.finish_run(run.id, owner="user", status="awaiting", stop_reason="awaiting",
                     messages=[AssistantMessage(content=(ToolCall(id="c1", name="compute",
                               raw="{}", arguments={}),), finish_reason="tool_calls")],
                     waits=[("c1", job.id)])  # fmt: skip
    store.claim_job("w", lease_s=300)
    store.complete_job(job.id, "w", {"ok": True})
    event = store.claim_work("w", lease_s=300)
    assert isinstance(event, OutboxEvent)
    answer = ToolResultMessage(tool_call_id="c1", name="compute", content="ok")
    delivery = store.deliver(event.id, answer, owner="w", lease_s=300)
    taken = delivery.continuation
    assert taken is not None and taken.parent_run_id == run.id
    assert (taken.status, taken.lease_owner, taken.attempts) == ("running", "w", 1)
    assert store.get_session(session.id).status == "running"  # type: ignore[union-attr]
    assert store.claim_work("other", lease_s=300) is None  # nobody else runs it
    store.finish_run(taken.id, owner="w", status="completed", stop_reason="end_turn")
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]


def _statements(store: Store) -> list[str]:
    """The first words of each statement `store` sends from now on."""
    from sqlalchemy import event

    sent: list[str] = []

    def record(conn: object, cursor: object, statement: str, *_: object) -> None:
        sent.append(" ".join(statement.split()[:2]))

    event.listen(store._engine, "before_cursor_execute", record)  # type: ignore[attr-defined]
    return sent


def test_a_claim_looks_only_for_the_kinds_of_work_there_are(store: Store) -> None:
    # Events and runs are rare (a result is delivered, and its continuation taken, as the
    # job ends): a claim reads which kinds there are in one statement, then looks only
    # there. An idle claim is that one read (three looks on PostgreSQL before).
    sent = _statements(store)
    assert store.claim_work("idle", look_first=False) is None
    assert len(sent) == 1 and sent[0].startswith("SELECT")
    store.enqueue_job("compute", {}, retry_safe=True)
    sent.clear()

    job = store.claim_work("w", look_first=False)

    assert isinstance(job, JobRecord) and job.lease_owner == "w"
    looked = [s for s in sent if s.startswith("SELECT") and s.endswith(".id,")]
    assert looked == ["SELECT jobs.id,"], sent  # not outbox.id, not runs.id
