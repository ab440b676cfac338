"""Batched claims on SQLite and PostgreSQL: one transaction claims work for several
owners (a worker's idle slots), most urgent first, each piece under its own owner's
lease; and a worker with several slots shares its claims among them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import tool
from pi_runtime.durable import JobRecord, OutboxEvent, RunRecord, Store
from pi_runtime.durable import schema as t
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker
from pi_runtime.exceptions import UserError

SESSIONS = 8


@tool(background=True, idempotent=False)
def ship(parcel: str, idempotency_key: str) -> dict[str, str]:
    """Ship a parcel: a side effect that must happen once."""
    shipped.append((parcel, idempotency_key))
    return {"parcel": parcel, "status": "shipped"}


shipped: list[tuple[str, str]] = []
SHIPPING = [ship]


def test_a_batch_claims_events_then_runs_then_jobs_each_under_its_own_owner(
    store: Store,
) -> None:
    first = store.create_session("s1")
    run = store.create_run(first.id, owner="user", lease_s=30)
    done = store.enqueue_job("compute", {"n": 1}, session_id=first.id, tool_call_id="c1")
    queued = store.enqueue_job("compute", {"n": 2}, session_id=first.id, tool_call_id="c2")
    assert [w.id for w in store.claim_batch(["w"], lease_s=30)] == [done.id]
    store.complete_job(done.id, "w", {"ok": 1})
    store.finish_run(run.id, owner="user", status="awaiting", stop_reason="awaiting",
                     waits=[("c1", done.id), ("c2", queued.id)])  # fmt: skip
    second = store.create_session("s2")
    user_run = store.create_run(second.id)  # queued for a worker
    loose = store.enqueue_job("compute", {"n": 3})

    claimed = store.claim_batch(["a", "b", "c", "d", "e"], lease_s=30)

    assert [type(w) for w in claimed] == [OutboxEvent, RunRecord, JobRecord, JobRecord]
    assert isinstance(claimed[0], OutboxEvent) and claimed[0].job_id == done.id
    assert claimed[1].id == user_run.id and claimed[2].id == queued.id
    assert claimed[3].id == loose.id
    # each under the lease of the owner in its place: its holder alone may end it
    assert claimed[0].lease_owner == "a"
    assert store.get_run(user_run.id).lease_owner == "b"  # type: ignore[union-attr]
    assert store.get_job(queued.id).lease_owner == "c"  # type: ignore[union-attr]
    assert store.get_job(loose.id).lease_owner == "d"  # type: ignore[union-attr]
    assert store.get_session(second.id).status == "running"  # type: ignore[union-attr]
    assert store.claim_batch(["x", "y"], lease_s=30) == []  # nothing left, nothing taken
    store.complete_job(loose.id, "d", {"ok": 3})
    with pytest.raises(Exception, match="not held"):
        store.complete_job(queued.id, "d", {"ok": 2})  # another slot's job


def test_a_batch_takes_one_run_of_a_session(store: Store) -> None:
    session = store.create_session("s1")
    queued = store.create_run(session.id)
    with store._engine.begin() as conn:  # type: ignore[attr-defined]
        # a second queued run of the same session (as only a fault could leave)
        row = conn.execute(t.runs.select().where(t.runs.c.id == queued.id)).mappings().one()
        conn.execute(t.runs.insert().values({**row, "id": "run_second"}))

    claimed = store.claim_batch(["a", "b"], lease_s=30)

    assert [w.id for w in claimed] == [queued.id]  # one worker per session at a time
    runs = {r.id: r for r in store.list_runs(session.id)}
    assert runs["run_second"].status == "queued"


@pytest.mark.parametrize("owners", [["a", "a"], "ab", ["a", ""]])
def test_a_batch_needs_distinct_owners(store: Store, owners: Any) -> None:
    store.enqueue_job("compute", {"n": 1})
    store.enqueue_job("compute", {"n": 2})
    with pytest.raises(UserError):
        store.claim_batch(owners, lease_s=30)
    assert store.claim_batch([], lease_s=30) == []
    # nothing was taken by the refused claims
    assert len(store.claim_batch(["x", "y", "z"], lease_s=30)) == 2


def awaiting_sessions(store: Store, tmp: Path, count: int) -> list[str]:
    """`count` sessions, each `awaiting` one background `ship` call."""
    script = tmp / "ship.json"
    steps = [{"tool_calls": [{"name": "ship", "arguments": {"parcel": "p"}}]}, {"text": "sent"}]
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    recipe = Recipe(model=f"scripted:{script}", tools=("test_claim_batch:SHIPPING",))
    ids = []
    for n in range(count):
        session_id = f"parcel-{n}"
        _, kept = open_session(store, session_id, recipe)
        agent = kept.build_agent(trace_dir=False)
        turn = asyncio.run(run_turn(store, session_id, "ship it", agent=agent, owner="cli"))
        assert turn.run.status == "awaiting"
        ids.append(session_id)
    return ids


def test_a_worker_shares_one_claim_among_its_idle_slots(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = awaiting_sessions(store, tmp_path, SESSIONS)
    shipped.clear()
    batches: list[tuple[list[str], list[Any]]] = []
    original = store.claim_batch

    def recorded(owners: list[str], **options: Any) -> list[Any]:
        claimed = original(owners, **options)
        batches.append((list(owners), claimed))
        return claimed

    monkeypatch.setattr(store, "claim_batch", recorded)
    commits: list[int] = []
    event.listen(store._engine, "commit", lambda conn: commits.append(1))  # type: ignore[attr-defined]
    worker = Worker(store, concurrency=4, poll_s=0.01, trace_dir=False)
    stats = asyncio.run(asyncio.wait_for(worker.run(once=True), 60))

    assert (dict(stats.jobs), dict(stats.runs)) == (
        {"succeeded": SESSIONS},
        {"completed": SESSIONS},
    )
    assert stats.errors == 0
    for session_id in sessions:
        assert store.get_session(session_id).status == "completed"  # type: ignore[union-attr]
    assert len(shipped) == SESSIONS and len(set(shipped)) == SESSIONS  # each once
    # idle slots were claimed for: some claim took several jobs, each for another slot
    shared = [(owners, claimed) for owners, claimed in batches if len(claimed) > 1]
    assert shared, batches
    for owners, claimed in shared:
        assert [w.lease_owner for w in claimed] == owners[: len(claimed)]
        assert len(set(owners)) == len(owners)
    assert sum(len(claimed) for _, claimed in batches) == SESSIONS
    assert len([claimed for _, claimed in batches if claimed]) < SESSIONS  # fewer claims
    for session_id in sessions:
        (job,) = store.list_jobs(session_id)
        assert job.attempts == 1 and job.status == "succeeded"


def test_a_claim_that_finds_nothing_leaves_the_idle_slots_waiting(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty claim made for idle slots must not wake them into looks of their own:
    # otherwise every idle look would set off one per slot.
    looks: list[int] = []
    original = store.claim_batch

    def recorded(owners: list[str], **options: Any) -> list[Any]:
        looks.append(len(owners))
        return original(owners, **options)

    monkeypatch.setattr(store, "claim_batch", recorded)
    worker = Worker(store, concurrency=4, poll_s=0.2, trace_dir=False)

    async def idle_for(seconds: float) -> None:
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(seconds)
        worker.stop()
        await task

    asyncio.run(idle_for(1.0))
    # each slot backs off to one look per poll_s: about 35 looks in all here, where a
    # wake-up per empty claim would make hundreds
    assert 4 <= len(looks) <= 100, len(looks)


def test_work_handed_to_an_idle_slot_as_the_worker_stops_is_still_done(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A drain lets current work finish; work a shared claim handed to an idle slot is
    # current work, held under that slot's lease, so the slot does it before it stops.
    sessions = awaiting_sessions(store, tmp_path, 2)
    shipped.clear()
    worker = Worker(store, concurrency=2, poll_s=0.01, trace_dir=False)
    original = store.claim_batch
    loop: asyncio.AbstractEventLoop | None = None

    def stopping(owners: list[str], **options: Any) -> list[Any]:
        claimed = original(owners, **options)
        if len(claimed) == 2:  # one for each slot: stop while it is handed over
            assert loop is not None
            loop.call_soon_threadsafe(worker.stop)
        return claimed

    monkeypatch.setattr(store, "claim_batch", stopping)

    async def serve() -> Any:
        nonlocal loop
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(worker.run(), 60)

    stats = asyncio.run(serve())

    assert dict(stats.jobs) == {"succeeded": 2} and len(shipped) == 2
    for session_id in sessions:
        (job,) = store.list_jobs(session_id)
        assert job.status == "succeeded"
