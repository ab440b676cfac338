"""Many claimers at once, on SQLite and PostgreSQL: every job, event and run is taken by
exactly one of them, and every tool call gets exactly one result.

`one_store` threads share a store (its connection pool); `store_per_thread` gives each
thread its own engine and connections, as separate worker processes would have.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime.durable import Conflict, Store, open_store
from pi_runtime.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage

THREADS = 8
DEADLINE_S = 120  # a safety net against a hang, not a timing assertion


def run_threads(work: Callable[[int], None], count: int = THREADS) -> None:
    """Run `work(i)` on `count` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert not any(t.is_alive() for t in threads), "claimers hung"
    if failures:
        raise failures[0]


@pytest.fixture(params=["one_store", "store_per_thread"])
def stores(
    request: pytest.FixtureRequest, store: Store, store_factory: Callable[..., Store]
) -> list[Store]:
    if request.param == "one_store":
        return [store] * THREADS
    return [store, *(store_factory(migrate=False) for _ in range(THREADS - 1))]


def until_done(claim: Callable[[], bool], finished: Callable[[], bool]) -> None:
    """Keep claiming until `finished()`; an empty claim means "nothing free right now"."""
    give_up = time.monotonic() + DEADLINE_S
    while not finished():
        if not claim():
            assert time.monotonic() < give_up, "work left that nobody could claim"
            time.sleep(0.001)


def claim_concurrently(
    stores: list[Store], claim: Callable[[Store, str], Any], total: int
) -> list[str]:
    """Thread i calls `claim(stores[i], "worker-i")` until `total` claims are made between
    them; the ids of what they claimed, in the order claimed."""
    claims: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        def claim_one() -> bool:
            taken = claim(stores[i], f"worker-{i}")
            if taken is None:
                return False
            with lock:
                claims.append(taken.id)
            return True

        until_done(claim_one, lambda: len(claims) >= total)

    run_threads(worker)
    return claims


@pytest.mark.slow
def test_concurrent_claimers_take_each_job_exactly_once(stores: list[Store]) -> None:
    jobs = [stores[0].enqueue_job("compute", {"n": n}).id for n in range(200)]
    claims: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        mine = stores[i]

        def claim() -> bool:
            job = mine.claim_job(f"worker-{i}", lease_s=300)
            if job is None:
                return False
            with lock:
                claims.append(job.id)
            mine.complete_job(job.id, f"worker-{i}", {"by": i})
            return True

        until_done(claim, lambda: len(claims) >= len(jobs))

    run_threads(worker)
    assert Counter(claims) == Counter(jobs)  # every job claimed, none twice
    assert all(stores[0].get_job(j).status == "succeeded" for j in jobs)  # type: ignore[union-attr]
    assert stores[0].claim_job("late") is None


def awaiting_sessions(store: Store, sessions: int, calls: int) -> dict[str, list[str]]:
    """`sessions` sessions, each with a run that ended awaiting `calls` async results."""
    made: dict[str, list[str]] = {}
    for _ in range(sessions):
        session = store.create_session()
        run = store.create_run(session.id, owner="runner", lease_s=300)
        ids = [f"call-{k}" for k in range(calls)]
        waits = [
            (c, store.enqueue_job("compute", {"c": c}, session_id=session.id, tool_call_id=c).id)
            for c in ids
        ]
        assistant = AssistantMessage(
            content=tuple(ToolCall(id=c, name="compute", raw="{}") for c in ids),
            finish_reason="tool_calls",
        )
        store.finish_run(
            run.id, owner="runner", status="awaiting", stop_reason="awaiting_tool",
            messages=[UserMessage(content="go"), assistant], waits=waits,
        )  # fmt: skip
        made[session.id] = ids
    return made


@pytest.mark.slow
def test_workers_deliver_every_result_exactly_once(stores: list[Store]) -> None:
    """8 workers run 120 jobs of 40 sessions and deliver them: each call one result, each
    session one continuation, each event delivered by one claimer."""
    sessions = awaiting_sessions(stores[0], sessions=40, calls=3)
    total = sum(len(c) for c in sessions.values())
    events: list[int] = []
    outcomes: list[str] = []
    continued: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        mine, owner = stores[i], f"worker-{i}"

        def claim() -> bool:
            job = mine.claim_job(owner, lease_s=300)
            if job is not None:
                mine.complete_job(job.id, owner, {"job": job.id})
            event = mine.claim_outbox_event(owner, lease_s=300)
            if event is not None:
                message = ToolResultMessage(
                    tool_call_id=event.tool_call_id, name=event.tool, content=str(event.result)
                )
                delivery = mine.deliver(event.id, message)
                with lock:
                    events.append(event.id)
                    outcomes.append(delivery.outcome)
                    if delivery.continuation is not None:
                        continued.append(delivery.session_id)
            return job is not None or event is not None

        until_done(claim, lambda: len(events) >= total)

    run_threads(worker)
    assert len(events) == len(set(events)) == total
    assert set(outcomes) == {"delivered"}
    assert Counter(continued) == Counter(list(sessions))  # one continuation per session
    for session_id, ids in sessions.items():
        answers = [
            m.message.tool_call_id
            for m in stores[0].load_messages(session_id)
            if isinstance(m.message, ToolResultMessage)
        ]
        assert sorted(answers) == ids
        kinds = [r.kind for r in stores[0].list_runs(session_id)]
        assert kinds == ["user", "server_result"]
        assert stores[0].get_session(session_id).status == "queued"  # type: ignore[union-attr]


def test_concurrent_deliveries_to_one_session_queue_one_continuation(
    stores: list[Store],
) -> None:
    ((session_id, ids),) = awaiting_sessions(stores[0], sessions=1, calls=24).items()
    while (job := stores[0].claim_job("w", lease_s=300)) is not None:
        stores[0].complete_job(job.id, "w", "done")
    claimed = [e for e in iter(lambda: stores[0].claim_outbox_event("d", lease_s=300), None)]
    assert len(claimed) == 24
    continuations: list[Any] = []
    lock = threading.Lock()

    def deliver(i: int) -> None:
        for event in claimed[i::THREADS]:
            message = ToolResultMessage(
                tool_call_id=event.tool_call_id, name="compute", content="x"
            )
            delivery = stores[i].deliver(event.id, message)
            if delivery.continuation is not None:
                with lock:
                    continuations.append(delivery.continuation.id)

    run_threads(deliver)
    assert len(continuations) == 1
    runs = stores[0].list_runs(session_id)
    assert [r.id for r in runs if r.kind == "server_result"] == continuations
    assert len(stores[0].load_messages(session_id)) == 2 + len(ids)


def test_concurrent_run_claimers_take_each_run_once(stores: list[Store]) -> None:
    runs = []
    for _ in range(40):
        session = stores[0].create_session()
        runs.append(stores[0].create_run(session.id, input={"prompt": "hi"}).id)
    claims = claim_concurrently(
        stores, lambda store, owner: store.claim_run(owner, lease_s=300), len(runs)
    )
    assert Counter(claims) == Counter(runs)


def test_only_one_of_many_concurrent_runs_starts_on_a_session(stores: list[Store]) -> None:
    session = stores[0].create_session()
    started: list[str] = []
    refused: list[int] = []
    lock = threading.Lock()

    def start(i: int) -> None:
        try:
            run = stores[i].create_run(session.id, owner=f"cli-{i}")
        except Conflict:
            with lock:
                refused.append(i)
            return
        with lock:
            started.append(run.id)

    run_threads(start)
    assert len(started) == 1 and len(refused) == THREADS - 1
    assert [r.id for r in stores[0].list_runs(session.id)] == started


def test_expired_leases_are_taken_over_once_under_contention(
    stores: list[Store], clock: FakeClock
) -> None:
    jobs = [stores[0].enqueue_job("compute", {"n": n}).id for n in range(40)]
    for _ in jobs:
        assert stores[0].claim_job("crashed", lease_s=10) is not None
    clock.advance(11)  # the crashed worker's leases all run out
    claims = claim_concurrently(
        stores, lambda store, owner: store.claim_job(owner, lease_s=300), len(jobs)
    )
    assert Counter(claims) == Counter(jobs)
    assert {stores[0].get_job(j).attempts for j in jobs} == {2}  # type: ignore[union-attr]


def _open_together(url: str, count: int) -> list[BaseException]:
    """Open `count` stores on `url` at the same instant; what they raised."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []
    opened: list[Store] = []

    def open_one() -> None:
        barrier.wait()
        try:
            opened.append(open_store(url))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    return failures


def test_processes_opening_a_fresh_sqlite_file_together_never_see_it_locked(
    tmp_path: Path,
) -> None:
    # Regression: switching a new file to WAL races, and SQLite answers "database is
    # locked" at once instead of waiting: ~1 round in 20 failed before the retry.
    for round_ in range(25):
        failures = _open_together(f"sqlite:///{tmp_path / f'fresh-{round_}.db'}", 6)
        assert failures == [], f"round {round_}: {failures[0]}"
