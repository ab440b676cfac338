"""A worker that ran a job delivers its result in the transaction that ends it
(`finish_job`), on SQLite and PostgreSQL: the same message, exactly once, and nothing
written when the job is no longer its own or its ending cannot be stored."""

from __future__ import annotations

import math

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime.durable import JobEnding, LeaseLost, Store
from pi_runtime.durable.results import ending_message, json_result, qrp1_result, result_message
from pi_runtime.exceptions import UserError
from pi_runtime.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from test_store_delivery import start_awaiting, tool_results


def _claimed(store: Store, owner: str = "w") -> str:
    job = store.claim_job(owner)
    assert job is not None
    return job.id


def test_an_awaited_job_ending_is_delivered_with_it_and_its_continuation_taken(
    store: Store,
) -> None:
    flow = start_awaiting(store)
    job_id = _claimed(store)
    job = store.get_job(job_id)
    assert job is not None
    ending = JobEnding(status="succeeded", result={"rows": [1, 2]})
    message = ending_message(job, ending, encoder=json_result)

    done = store.finish_job(job_id, "w", ending, message=message, take=True, lease_s=30)

    assert done.job.status == "succeeded" and done.job.result == {"rows": [1, 2]}
    assert done.delivery is not None and done.delivery.outcome == "delivered"
    continuation = done.delivery.continuation
    assert continuation is not None and continuation.status == "running"
    assert continuation.lease_owner == "w"
    assert tool_results(store, flow.session_id) == [message]
    assert store.claim_outbox_event("other") is None  # nothing left to deliver
    assert store.claim_work("other") is None  # and the continuation is already held
    # its event was written delivered: delivering it again changes nothing
    again = store.deliver(done.delivery.event_id, message)
    assert again.outcome == "duplicate" and again.continuation is None
    assert tool_results(store, flow.session_id) == [message]


def test_a_job_whose_call_another_path_answered_ends_as_a_duplicate_delivery(
    store: Store,
) -> None:
    flow = start_awaiting(store)
    other = ToolResultMessage(tool_call_id="call-0", name="compute", content="x")
    store.append_messages(flow.session_id, [other])
    job_id = _claimed(store)
    job = store.get_job(job_id)
    assert job is not None
    ending = JobEnding(status="succeeded", result=2)

    done = store.finish_job(job_id, "w", ending, message=ending_message(job, ending),
                            take=True, lease_s=30)  # fmt: skip

    assert done.job.status == "succeeded"
    assert done.delivery is not None and done.delivery.outcome == "duplicate"
    assert done.delivery.continuation is not None  # the wait is over all the same
    assert tool_results(store, flow.session_id) == [other]  # answered once, by the other


def test_a_job_ending_before_its_wait_is_delivered_once_the_wait_comes(store: Store) -> None:
    flow = start_awaiting(store, finish=False)  # the run has not registered its wait yet
    job_id = _claimed(store)
    job = store.get_job(job_id)
    assert job is not None
    ending = JobEnding(status="failed", error={"kind": "tool_error", "message": "no", "hint": ""})
    message = ending_message(job, ending)

    done = store.finish_job(job_id, "w", ending, message=message, take=True, lease_s=30)
    assert done.delivery is None and done.job.status == "failed"
    assert tool_results(store, flow.session_id) == []

    call = ToolCall(id="call-0", name="compute", raw="{}", arguments={})
    store.finish_run(flow.run_id, owner="runner", status="awaiting", stop_reason="awaiting_tool",
                     messages=[UserMessage(content="go"), AssistantMessage(content=(call,))],
                     waits=[("call-0", job_id)])  # fmt: skip
    event = store.claim_outbox_event("deliverer")
    assert event is not None and event.job_id == job_id
    assert result_message(event) == message  # the same answer either way
    assert store.deliver(event.id, message).outcome == "delivered"
    assert tool_results(store, flow.session_id) == [message]


def test_a_job_no_longer_held_writes_nothing(store: Store) -> None:
    flow = start_awaiting(store)
    job_id = _claimed(store, "first")
    job = store.get_job(job_id)
    assert job is not None
    ending = JobEnding(status="succeeded", result=1)
    with pytest.raises(LeaseLost):
        store.finish_job(job_id, "second", ending, message=ending_message(job, ending))
    assert store.get_job(job_id).status == "running"  # type: ignore[union-attr]
    assert tool_results(store, flow.session_id) == []
    assert store.claim_outbox_event("other") is None  # no event was written either


def test_an_ending_that_cannot_be_stored_is_refused_and_nothing_is_written(store: Store) -> None:
    flow = start_awaiting(store)
    job_id = _claimed(store)
    job = store.get_job(job_id)
    assert job is not None
    answer = ending_message(job, JobEnding(status="succeeded", result="x"))
    for bad, why in [
        (JobEnding(status="succeeded", result=math.nan), "JSON"),
        (JobEnding(status="succeeded", result=1, max_result_bytes=0), "max_result_bytes"),
        (JobEnding(status="failed"), "carries its error"),
        (JobEnding(status="failed", error={"message": "no kind"}), "kind"),
        (JobEnding(status="done", result=1), "not 'done'"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(UserError, match=why):
            store.finish_job(job_id, "w", bad, message=answer)
    with pytest.raises(UserError, match="ToolResultMessage"):
        store.finish_job(job_id, "w", JobEnding(status="succeeded", result=1),
                         message="not a message")  # type: ignore[arg-type]  # fmt: skip
    assert store.get_job(job_id).status == "running"  # type: ignore[union-attr]
    assert tool_results(store, flow.session_id) == []


def test_a_job_of_no_tool_call_has_no_message_and_ends_without_delivery(store: Store) -> None:
    queued = store.enqueue_job("compute", {})  # nobody's call: nothing awaits it
    job_id = _claimed(store)
    assert job_id == queued.id
    ending = JobEnding(status="succeeded", result=1)
    with pytest.raises(UserError, match="answers no tool call"):
        ending_message(queued, ending)
    done = store.finish_job(job_id, "w", ending, take=True)
    assert done.delivery is None and done.job.status == "succeeded"


def test_a_running_job_of_a_cancelled_session_cannot_end_and_its_event_is_ignored(
    store: Store,
) -> None:
    flow = start_awaiting(store)
    job_id = _claimed(store)
    job = store.get_job(job_id)
    assert job is not None
    store.cancel_session(flow.session_id)  # the call is answered `cancelled`, the job ends
    ending = JobEnding(status="succeeded", result=1)
    with pytest.raises(LeaseLost):
        store.finish_job(job_id, "w", ending, message=ending_message(job, ending), take=True)
    assert store.get_job(job_id).status == "cancelled"  # type: ignore[union-attr]
    event = store.claim_outbox_event("other")  # the cancelled job's own event
    assert event is not None and event.wait_status == "cancelled"
    assert store.deliver(event.id, ending_message(job, ending)).outcome == "ignored"
    assert store.claim_outbox_event("other") is None
    (cancelled,) = tool_results(store, flow.session_id)
    assert cancelled.is_error and cancelled.error is not None
    assert cancelled.error.kind == "cancelled"


@pytest.mark.parametrize("encoder", [qrp1_result, json_result])
def test_the_ending_message_is_what_the_event_would_deliver(store: Store, encoder: object) -> None:
    # a result over its cap is cut the same way, and a failure reads the same
    endings = [
        JobEnding(status="succeeded", result={"text": "é" * 400}, max_result_bytes=200),
        JobEnding(status="succeeded", result=[1, 2.5, None, "x"]),
        JobEnding(status="outcome_unknown",
                  error={"kind": "outcome_unknown", "message": "cut", "hint": "check"}),
    ]  # fmt: skip
    for ending in endings:
        start_awaiting(store)
        job_id = _claimed(store)
        job = store.get_job(job_id)
        assert job is not None
        store.finish_job(job_id, "w", ending)  # no message: delivered from its event
        event = store.claim_outbox_event("deliverer")
        assert event is not None and event.job_id == job_id
        expected = result_message(event, encoder=encoder)  # type: ignore[arg-type]
        assert ending_message(job, ending, encoder=encoder) == expected  # type: ignore[arg-type]
        store.deliver(event.id, expected)
