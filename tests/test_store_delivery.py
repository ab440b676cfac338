"""Async results reach the right conversation exactly once (seed 004), on SQLite and
PostgreSQL: waits, the outbox, delivery, continuation runs and cancellation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime.durable import Conflict, LeaseLost, NotFound, OutboxEvent, Store, _runs
from pi_runtime.exceptions import UserError
from pi_runtime.messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


@dataclass
class Awaiting:
    session_id: str
    run_id: str
    jobs: dict[str, str]  # tool_call_id -> job_id


def start_awaiting(store: Store, calls: int = 1, *, finish: bool = True) -> Awaiting:
    """A session whose run called `calls` async tools and ended awaiting their results."""
    session = store.create_session()
    run = store.create_run(session.id, input={"prompt": "go"}, owner="runner")
    ids = [f"call-{i}" for i in range(calls)]
    jobs = {
        cid: store.enqueue_job("compute", {"i": i}, session_id=session.id, tool_call_id=cid).id
        for i, cid in enumerate(ids)
    }
    if finish:
        assistant = AssistantMessage(
            content=tuple(ToolCall(id=c, name="compute", raw="{}", arguments={}) for c in ids),
            finish_reason="tool_calls",
        )
        store.finish_run(
            run.id, owner="runner", status="awaiting", stop_reason="awaiting_tool",
            messages=[UserMessage(content="go"), assistant], waits=list(jobs.items()),
        )  # fmt: skip
    return Awaiting(session.id, run.id, jobs)


def run_job(store: Store, job_id: str, result: Any = "done") -> None:
    claimed = store.claim_job("job-worker")
    assert claimed is not None and claimed.id == job_id
    store.complete_job(job_id, "job-worker", result)


def answer(event: OutboxEvent) -> ToolResultMessage:
    """What a worker appends for an event (the real one encodes QRP1)."""
    if event.kind == "completed":
        return ToolResultMessage(
            tool_call_id=event.tool_call_id, name=event.tool, content=json.dumps(event.result)
        )
    return ToolResultMessage(
        tool_call_id=event.tool_call_id, name=event.tool, content=json.dumps(event.error),
        is_error=True,
    )  # fmt: skip


def tool_results(store: Store, session_id: str) -> list[ToolResultMessage]:
    return [
        m.message
        for m in store.load_messages(session_id)
        if isinstance(m.message, ToolResultMessage)
    ]


def test_a_finished_job_is_delivered_and_its_session_continued(store: Store) -> None:
    flow = start_awaiting(store)
    assert store.get_session(flow.session_id).status == "awaiting_server_tool"  # type: ignore[union-attr]
    assert store.get_run(flow.run_id).status == "awaiting"  # type: ignore[union-attr]
    assert store.claim_outbox_event("deliverer") is None  # nothing finished yet
    run_job(store, flow.jobs["call-0"], {"crossings": 3})
    event = store.claim_outbox_event("deliverer", lease_s=30)
    assert event is not None
    assert (event.kind, event.session_id, event.tool_call_id, event.tool, event.result) == (
        "completed", flow.session_id, "call-0", "compute", {"crossings": 3},
    )  # fmt: skip
    delivery = store.deliver(event.id, answer(event))
    assert (delivery.outcome, delivery.seq) == ("delivered", 2)
    continuation = delivery.continuation
    assert continuation is not None
    assert (continuation.kind, continuation.status, continuation.parent_run_id) == (
        "server_result", "queued", flow.run_id,
    )  # fmt: skip
    assert store.get_session(flow.session_id).status == "queued"  # type: ignore[union-attr]
    (only,) = tool_results(store, flow.session_id)
    assert (only.tool_call_id, only.content) == ("call-0", '{"crossings": 3}')
    (wait,) = store.list_waits(flow.session_id)
    assert (wait.status, wait.event_id) == ("delivered", event.id)
    assert store.claim_outbox_event("deliverer") is None
    claimed = store.claim_run("runner-2")
    assert claimed is not None and claimed.id == continuation.id


def test_a_failed_job_is_delivered_as_an_error_result(store: Store) -> None:
    flow = start_awaiting(store)
    store.claim_job("w")
    store.fail_job(flow.jobs["call-0"], "w", {"kind": "not_found", "message": "no symbol"})
    event = store.claim_outbox_event("d")
    assert event is not None and event.kind == "failed"
    assert event.payload == {
        "status": "failed", "error": {"kind": "not_found", "message": "no symbol"},
    }  # fmt: skip
    assert store.deliver(event.id, answer(event)).continuation is not None
    (only,) = tool_results(store, flow.session_id)
    assert only.is_error and "no symbol" in only.content


def test_the_continuation_waits_for_every_awaited_result(store: Store) -> None:
    flow = start_awaiting(store, calls=3)
    deliveries = []
    for job_id in flow.jobs.values():
        run_job(store, job_id)
        event = store.claim_outbox_event("d")
        assert event is not None
        deliveries.append(store.deliver(event.id, answer(event)))
    assert [d.continuation is not None for d in deliveries] == [False, False, True]
    assert store.get_session(flow.session_id).status == "queued"  # type: ignore[union-attr]
    assert [m.tool_call_id for m in tool_results(store, flow.session_id)] == [
        "call-0", "call-1", "call-2",
    ]  # fmt: skip


def test_a_duplicate_outbox_event_is_skipped(store: Store, clock: FakeClock) -> None:
    flow = start_awaiting(store)
    run_job(store, flow.jobs["call-0"])
    event = store.claim_outbox_event("d1", lease_s=10)
    assert event is not None
    first = store.deliver(event.id, answer(event))
    second = store.deliver(event.id, answer(event))  # a retried delivery
    clock.advance(60)
    assert store.claim_outbox_event("d2") is None  # delivered events are never claimed again
    assert (first.outcome, second.outcome) == ("delivered", "duplicate")
    assert second.continuation is None
    assert len(tool_results(store, flow.session_id)) == 1
    runs = store.list_runs(flow.session_id)
    assert [r.kind for r in runs] == ["user", "server_result"]


def test_delivery_is_one_transaction(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = start_awaiting(store)
    run_job(store, flow.jobs["call-0"])
    event = store.claim_outbox_event("d1", lease_s=10)
    assert event is not None
    before = len(store.load_messages(flow.session_id))

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError("worker died while queueing the continuation")

    monkeypatch.setattr(_runs, "queue_continuation", crash)
    with pytest.raises(RuntimeError, match="worker died"):
        store.deliver(event.id, answer(event))
    # Nothing partial is visible: no message, wait still pending, event still undelivered.
    assert len(store.load_messages(flow.session_id)) == before
    assert [w.status for w in store.list_waits(flow.session_id)] == ["pending"]
    assert [r.kind for r in store.list_runs(flow.session_id)] == ["user"]
    assert store.get_session(flow.session_id).status == "awaiting_server_tool"  # type: ignore[union-attr]
    monkeypatch.undo()
    clock.advance(11)  # the crashed deliverer's lease runs out; another takes over
    again = store.claim_outbox_event("d2")
    assert again is not None and again.id == event.id and again.attempts == 2
    delivered = store.deliver(again.id, answer(again))
    assert delivered.outcome == "delivered" and delivered.continuation is not None
    assert len(tool_results(store, flow.session_id)) == 1


def test_a_live_outbox_lease_is_not_reclaimable_and_an_expired_one_is(
    store: Store, clock: FakeClock
) -> None:
    flow = start_awaiting(store)
    run_job(store, flow.jobs["call-0"])
    assert store.claim_outbox_event("d1", lease_s=10) is not None
    clock.advance(9)
    assert store.claim_outbox_event("d2") is None
    clock.advance(2)
    taken = store.claim_outbox_event("d2")
    assert taken is not None and taken.lease_owner == "d2"


def test_a_cancelled_wait_ignores_late_events(store: Store) -> None:
    flow = start_awaiting(store)
    store.claim_job("w")
    # the job finished, its result not delivered yet, when the user gives up
    store.complete_job(flow.jobs["call-0"], "w", "late")
    cancelled = store.cancel_session(flow.session_id)
    assert cancelled.waits_cancelled == ("call-0",)
    assert cancelled.session.status == "cancelled"
    (placeholder,) = tool_results(store, flow.session_id)
    assert placeholder.is_error and placeholder.error is not None
    assert placeholder.error.kind == "cancelled"
    assert json.loads(placeholder.content)["kind"] == "cancelled"
    event = store.claim_outbox_event("d")
    assert event is not None and event.wait_status == "cancelled"
    delivery = store.deliver(event.id, answer(event))
    assert (delivery.outcome, delivery.continuation) == ("ignored", None)
    assert tool_results(store, flow.session_id) == [placeholder]  # nothing delivered after
    assert [r.kind for r in store.list_runs(flow.session_id)] == ["user"]
    assert store.get_session(flow.session_id).status == "cancelled"  # type: ignore[union-attr]
    assert store.claim_outbox_event("d") is None


def test_cancelling_stops_runs_and_jobs_not_yet_started(store: Store) -> None:
    session = store.create_session()
    run = store.create_run(session.id, owner="runner")
    queued = store.enqueue_job("compute", {}, session_id=session.id, tool_call_id="c1")
    result = store.cancel_session(session.id)
    assert (result.runs_cancelled, result.jobs_cancelled) == ((run.id,), (queued.id,))
    stopped = store.get_run(run.id)
    assert stopped is not None and (stopped.status, stopped.stop_reason) == ("stopped", "cancelled")
    with pytest.raises(LeaseLost):  # the runner learns it was cancelled and writes nothing
        store.finish_run(
            run.id, owner="runner", status="completed", stop_reason="final_answer",
            messages=[UserMessage(content="too late")],
        )  # fmt: skip
    assert store.load_messages(session.id) == []
    assert store.get_job(queued.id).status == "cancelled"  # type: ignore[union-attr]
    assert store.claim_job("w") is None
    # Its holder may store what it did, as cancelled; meanwhile no new run starts ...
    with pytest.raises(Conflict):
        store.create_run(session.id)
    store.finish_cancelled_run(run.id, owner="runner", messages=[UserMessage(content="hi")])
    assert [m.message.role for m in store.load_messages(session.id)] == ["user"]
    # ... and then the conversation stays usable: a new user run may start.
    assert store.create_run(session.id).status == "queued"


def test_a_job_finished_before_its_wait_was_registered_is_still_delivered(
    store: Store,
) -> None:
    flow = start_awaiting(store, finish=False)
    job_id = flow.jobs["call-0"]
    run_job(store, job_id, 42)  # finishes while the run is still going
    assert store.claim_outbox_event("d") is None  # nobody awaits it yet
    finished = store.finish_run(
        flow.run_id, owner="runner", status="awaiting", stop_reason="awaiting_tool",
        messages=[UserMessage(content="go"),
                  AssistantMessage(content=(ToolCall(id="call-0", name="compute", raw="{}"),))],
        waits=[("call-0", job_id)],
    )  # fmt: skip
    assert finished.continuation is None  # the result is not in the conversation yet
    (wait,) = store.list_waits(flow.session_id)
    assert wait.status == "pending"
    event = store.claim_outbox_event("d")
    assert event is not None and event.result == 42
    delivery = store.deliver(event.id, answer(event))
    assert delivery.outcome == "delivered" and delivery.continuation is not None


def test_register_wait_reports_a_job_that_already_finished(store: Store) -> None:
    flow = start_awaiting(store, finish=False)
    job_id = flow.jobs["call-0"]
    pending = store.register_wait(flow.session_id, "call-0", job_id, run_id=flow.run_id)
    assert (pending.status, pending.job_done) == ("pending", False)
    run_job(store, job_id)
    again = store.register_wait(flow.session_id, "call-0", job_id, run_id=flow.run_id)
    assert (again.status, again.job_done) == ("pending", True)
    assert store.claim_outbox_event("d") is not None


def test_results_delivered_before_the_run_finished_are_continued_by_its_finish(
    store: Store,
) -> None:
    flow = start_awaiting(store, finish=False)
    job_id = flow.jobs["call-0"]
    store.register_wait(flow.session_id, "call-0", job_id, run_id=flow.run_id)
    run_job(store, job_id)
    event = store.claim_outbox_event("d")
    assert event is not None
    early = store.deliver(event.id, answer(event))
    assert (early.outcome, early.continuation) == ("delivered", None)  # the run still runs
    finished = store.finish_run(
        flow.run_id, owner="runner", status="awaiting", stop_reason="awaiting_tool"
    )
    assert finished.continuation is not None
    assert finished.continuation.parent_run_id == flow.run_id
    assert store.get_session(flow.session_id).status == "queued"  # type: ignore[union-attr]


def test_waits_are_checked(store: Store) -> None:
    flow = start_awaiting(store)
    other = store.create_session()
    job_id = flow.jobs["call-0"]
    with pytest.raises(Conflict, match="belongs to session"):
        store.register_wait(other.id, "call-0", job_id)
    with pytest.raises(Conflict, match="already waits for job"):
        spare = store.enqueue_job("compute", {"spare": True}, session_id=flow.session_id,
                                  tool_call_id="call-9")  # fmt: skip
        store.register_wait(flow.session_id, "call-0", spare.id)
    with pytest.raises(Conflict, match="already awaited"):
        store.register_wait(flow.session_id, "call-7", job_id)
    with pytest.raises(NotFound):
        store.register_wait(flow.session_id, "call-8", "job-missing")
    with pytest.raises(NotFound):
        store.register_wait("missing", "call-8", job_id)
    answered = store.enqueue_job("compute", {}, session_id=other.id, tool_call_id="c1")
    store.append_messages(other.id, [ToolResultMessage(tool_call_id="c1", name="x", content="")])
    with pytest.raises(Conflict, match="already has a result"):
        store.register_wait(other.id, "c1", answered.id)


def test_delivering_a_message_for_another_call_is_refused(store: Store) -> None:
    flow = start_awaiting(store)
    run_job(store, flow.jobs["call-0"])
    event = store.claim_outbox_event("d")
    assert event is not None
    wrong = ToolResultMessage(tool_call_id="call-other", name="compute", content="x")
    with pytest.raises(UserError, match="answers tool call 'call-0'"):
        store.deliver(event.id, wrong)
    with pytest.raises(UserError, match="ToolResultMessage"):
        store.deliver(event.id, UserMessage(content="x"))  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        store.deliver(10_000, answer(event))
    assert tool_results(store, flow.session_id) == []
    assert store.deliver(event.id, answer(event)).outcome == "delivered"


def test_a_result_appended_by_another_path_makes_the_event_a_duplicate(store: Store) -> None:
    flow = start_awaiting(store)
    store.append_messages(
        flow.session_id, [ToolResultMessage(tool_call_id="call-0", name="compute", content="x")]
    )
    run_job(store, flow.jobs["call-0"])
    event = store.claim_outbox_event("d")
    assert event is not None
    delivery = store.deliver(event.id, answer(event))
    assert delivery.outcome == "duplicate"
    assert delivery.continuation is not None  # the wait is over all the same
    assert len(tool_results(store, flow.session_id)) == 1


def test_cancelling_after_some_results_arrived_queues_no_continuation(store: Store) -> None:
    flow = start_awaiting(store, calls=2)
    run_job(store, flow.jobs["call-0"])
    first = store.claim_outbox_event("d")
    assert first is not None
    assert store.deliver(first.id, answer(first)).continuation is None  # call-1 still out
    assert store.claim_job("w") is not None  # call-1's job is running when the user gives up
    assert store.cancel_session(flow.session_id).waits_cancelled == ("call-1",)
    with pytest.raises(LeaseLost):  # the cancel ended it: its worker writes nothing
        store.complete_job(flow.jobs["call-1"], "w", "late")
    late = store.claim_outbox_event("d")
    assert late is not None
    assert (store.deliver(late.id, answer(late)).outcome, late.tool_call_id) == (
        "ignored",
        "call-1",
    )
    assert [r.kind for r in store.list_runs(flow.session_id)] == ["user"]
    results = tool_results(store, flow.session_id)
    assert [(m.tool_call_id, m.is_error) for m in results] == [("call-0", False), ("call-1", True)]
