"""The outbox: claiming job events, delivering results to sessions, cancelling sessions.

Delivery is one transaction: the tool message under the original `tool_call_id`, the
wait and the event marked, and — when it was the last result awaited — the queued
`server_result` run. A second copy of an event, or one for a cancelled wait, changes
nothing but the event's own `outcome`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, and_, bindparam, exists, or_, select

from ..exceptions import UserError
from ..messages import (
    ToolErrorKind,
    ToolResultMessage,
    tool_error_info,
    tool_error_result,
)
from . import _approvals, _jobs, _rows, _runs, _sessions, _waits
from . import schema as t
from ._leasing import claim_of, claim_under_lease
from ._stmts import NOW, key
from ._tx import Tx, check_id, check_lease
from .errors import Conflict, NotFound
from .records import (
    CancelResult,
    Delivery,
    FinishedJob,
    JobEnding,
    OutboxEvent,
    RunRecord,
    WaitRecord,
)

_FREE = and_(
    t.outbox.c.delivered_at.is_(None),
    or_(t.outbox.c.lease_expires_at.is_(None), t.outbox.c.lease_expires_at < NOW),
)
CLAIMABLE_EVENTS = and_(_FREE, exists().where(t.waits.c.job_id == t.outbox.c.job_id))
"""Events a claim may take: undelivered, not leased, and awaited."""

_CLAIM = claim_of(t.outbox, CLAIMABLE_EVENTS, oldest=t.outbox.c.id, still=_FREE)


def claim_events(tx: Tx, owners: Sequence[str], lease_s: float) -> list[OutboxEvent]:
    """Take the oldest undelivered events that a wait is registered for, one per owner.

    Events of jobs nobody awaits yet stay put: registering the wait makes them claimable,
    which is how a job that finished first is still delivered.
    """
    claimed = claim_under_lease(tx, _CLAIM, owners=owners, lease_s=lease_s)
    return [_event(tx, row.id) for row in claimed]


_EVENT = (
    select(
        t.outbox,
        t.waits.c.session_id,
        t.waits.c.tool_call_id,
        t.waits.c.status.label("wait_status"),
        t.jobs.c.tool,
        t.jobs.c.result.label("job_result"),
        t.jobs.c.error.label("job_error"),
    )
    .join(t.waits, t.waits.c.job_id == t.outbox.c.job_id)
    .join(t.jobs, t.jobs.c.id == t.outbox.c.job_id)
    .where(t.outbox.c.id == bindparam(key("id")))
)
_AWAITED = select(
    t.waits,
    exists()
    .where(
        t.messages.c.session_id == t.waits.c.session_id,
        t.messages.c.tool_call_id == t.waits.c.tool_call_id,
    )
    .label("answered"),
).where(
    t.waits.c.session_id == bindparam(key("session_id")),
    t.waits.c.tool_call_id == bindparam(key("tool_call_id")),
)
"""A call's wait, and whether the call is answered already: one read, not two."""
_WAIT_OF_EVENT = (
    select(t.waits.c.session_id, t.waits.c.tool_call_id)
    .select_from(t.outbox.outerjoin(t.waits, t.waits.c.job_id == t.outbox.c.job_id))
    .where(t.outbox.c.id == bindparam(key("id")))
)


def _event(tx: Tx, event_id: int) -> OutboxEvent:
    row = tx.conn.execute(_EVENT, {key("id"): event_id}).one()
    return OutboxEvent(
        id=row.id,
        job_id=row.job_id,
        kind=row.kind,
        payload=row.payload,
        session_id=row.session_id,
        tool_call_id=row.tool_call_id,
        wait_status=row.wait_status,
        tool=row.tool,
        result=row.job_result,
        error=row.job_error,
        attempts=row.attempts,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        created_at=row.created_at,
    )


def _mark(tx: Tx, event_id: int, outcome: str) -> None:
    tx.change(
        t.outbox,
        {"id": event_id},
        delivered_at=tx.now,
        outcome=outcome,
        lease_owner=None,
        lease_expires_at=None,
    )


def deliver(
    tx: Tx, event_id: int, message: ToolResultMessage, take: tuple[str, float] | None = None
) -> Delivery:
    """Append `message` for the event's wait and queue the continuation — or skip. With
    `take` (owner, lease_s) the continuation starts running under that lease."""
    if take is not None:
        check_id("owner", take[0])
        check_lease(take[1])
    if not isinstance(message, ToolResultMessage):
        raise UserError("deliver takes the ToolResultMessage answering the awaited call")
    found = tx.conn.execute(_WAIT_OF_EVENT, {key("id"): event_id}).one_or_none()
    if found is None:
        raise NotFound(f"no outbox event {event_id}")
    if found.session_id is None:
        raise Conflict(f"outbox event {event_id} has no wait to deliver to")
    session_id, tool_call_id = found.session_id, found.tool_call_id
    session = tx.lock_session(session_id)
    event = tx.find(t.outbox, "wait", id=event_id)
    if event is None:
        raise NotFound(f"no outbox event {event_id}")
    if event.delivered_at is not None:
        done = {"event_id": event_id, "session_id": session_id, "tool_call_id": tool_call_id}
        return Delivery(outcome="duplicate", **done)
    awaited = _awaited(tx, session_id, tool_call_id)
    assert awaited is not None
    wait, outcome = awaited
    _mark(tx, event_id, outcome)
    return _deliver_to(tx, event_id, session, wait, message, take, outcome=outcome)


def _deliver_to(
    tx: Tx,
    event_id: int,
    session: Row[Any],
    wait: WaitRecord,
    message: ToolResultMessage,
    take: tuple[str, float] | None,
    *,
    outcome: str,
) -> Delivery:
    """Deliver the event `event_id` for `wait`, marked `outcome` (what `_awaited` said
    of `wait` in this transaction; the caller locked `session`, its row as read since)."""
    session_id, tool_call_id = wait.session_id, wait.tool_call_id
    done: dict[str, Any] = {"event_id": event_id, "session_id": session_id}
    done["tool_call_id"] = tool_call_id
    if outcome == "ignored":
        return Delivery(outcome="ignored", **done)
    if outcome == "duplicate":
        if wait.status == "pending":  # answered by some other path: the wait is over
            _waits.resolve(tx, wait, "delivered", None)
            return Delivery(outcome="duplicate", continuation=_continue(tx, wait, take), **done)
        return Delivery(outcome="duplicate", **done)
    if message.tool_call_id != tool_call_id:
        raise UserError(
            f"event {event_id} answers tool call {tool_call_id!r}, not {message.tool_call_id!r}"
        )
    _waits.resolve(tx, wait, "delivered", event_id)
    continuation = _continue(tx, wait, take, set_status=False)
    # the session row is written once: its count, and the status a continuation gives it
    (seq,) = _sessions.append_messages(  # `_outcome` found the call unanswered
        tx, session_id, [message], run_id=wait.run_id, locked=session, unanswered=True,
        status=None if continuation is None else continuation.status,
    )  # fmt: skip
    inputs = None
    if continuation is not None and take is not None and continuation.lease_owner == take[0]:
        # the taker runs it next: what it reads, read here (one transaction less a job)
        inputs = _runs.turn_inputs(tx, continuation)
    return Delivery(outcome="delivered", seq=seq, continuation=continuation, inputs=inputs, **done)


def _awaited(tx: Tx, session_id: str, tool_call_id: str) -> tuple[WaitRecord, str] | None:
    """The call's wait, if any, and what delivering a result to it does: nothing for a
    cancelled wait (`ignored`), nothing for a call already answered (`duplicate`), else
    appends it (`delivered`)."""
    params = {key("session_id"): session_id, key("tool_call_id"): tool_call_id}
    row = tx.conn.execute(_AWAITED, params).one_or_none()
    if row is None:
        return None
    wait = _rows.wait(row)
    if wait.status == "cancelled":
        return wait, "ignored"
    if wait.status == "delivered" or row.answered:
        return wait, "duplicate"
    return wait, "delivered"


def finish_job(
    tx: Tx,
    job_id: str,
    owner: str,
    ending: JobEnding,
    message: ToolResultMessage | None = None,
    take: tuple[str, float] | None = None,
) -> FinishedJob:
    """End the job `owner` holds as `ending` says (its outbox event written with it) and,
    when its call is awaited, deliver `message` to it as `deliver` would (with `take`,
    the continuation starts under that lease) — one transaction, so a worker that ran
    the job needs no second claim to deliver it. Not awaited yet: the event waits for
    its wait, as after `complete_job`.

    Lock order as everywhere: the job's session, then the job."""
    ending = _jobs.check_ending(ending)
    if take is not None:
        check_id("owner", take[0])
        check_lease(take[1])
    if message is not None and not isinstance(message, ToolResultMessage):
        raise UserError("finish_job delivers the ToolResultMessage answering the awaited call")
    if message is None:
        return FinishedJob(job=_jobs.end(tx, _jobs.held(tx, job_id, owner), ending).job)
    session = tx.lock_session_of(t.jobs, job_id)
    held = _jobs.held(tx, job_id, owner)  # read after its session's lock: current
    if session is None or held.tool_call_id is None:  # a job of no conversation's call
        return FinishedJob(job=_jobs.end(tx, held, ending).job)
    awaited = _awaited(tx, held.session_id, held.tool_call_id)
    # No notice: the event is delivered here, or claimable only once its wait is
    # registered, which gives notice itself.
    if awaited is None or awaited[0].job_id != job_id:  # not awaited (yet), or not this job
        return FinishedJob(job=_jobs.end(tx, held, ending, notify=False).job)
    # decided first, so the event is written as delivered (not written, then marked)
    wait, outcome = awaited
    ended = _jobs.end(tx, held, ending, notify=False, outcome=outcome)
    delivery = _deliver_to(tx, ended.event_id, session, wait, message, take, outcome=outcome)
    return FinishedJob(job=ended.job, delivery=delivery)


def _continue(
    tx: Tx, wait: WaitRecord, take: tuple[str, float] | None = None, *, set_status: bool = True
) -> RunRecord | None:
    if wait.run_id is None:
        return None
    return _runs.queue_continuation(
        tx, wait.session_id, wait.run_id, take=take, set_status=set_status
    )


def cancel_session(tx: Tx, session_id: str) -> CancelResult:
    """Stop waiting: pending waits and approvals are cancelled and each awaited call is
    answered with a `cancelled` error (the conversation stays well-formed, and no later
    result can land); queued, running and awaiting runs stop (a running run's holder is
    told at once, and stores what it did); unfinished jobs are cancelled (a worker running
    one is told at once)."""
    tx.lock_session(session_id)
    pending = [w for w in _waits.list_waits(tx, session_id) if w.status == "pending"]
    answers = []
    for wait in pending:
        _waits.resolve(tx, wait, "cancelled", None)
        if not _sessions.has_result(tx, session_id, wait.tool_call_id):
            answers.append(_cancelled_result(tx, wait))
    undecided = _approvals.cancel_pending(tx, session_id)
    _sessions.append_messages(tx, session_id, [*answers, *undecided])
    runs = _runs.cancel_runs(tx, session_id)
    jobs = _jobs.cancel_unfinished(tx, session_id)
    tx.set_session_status(session_id, "cancelled")
    session = _sessions.get_session(tx, session_id)
    assert session is not None
    return CancelResult(
        session=session,
        waits_cancelled=tuple(w.tool_call_id for w in pending),
        approvals_cancelled=tuple(m.tool_call_id for m in undecided),
        runs_cancelled=tuple(runs),
        jobs_cancelled=tuple(jobs),
    )


def _cancelled_result(tx: Tx, wait: WaitRecord) -> ToolResultMessage:
    job: Row[Any] = tx.conn.execute(select(t.jobs.c.tool).where(t.jobs.c.id == wait.job_id)).one()
    info = tool_error_info(
        ToolErrorKind.CANCELLED, "the wait for this result was cancelled; it will not be delivered"
    )
    return tool_error_result(wait.tool_call_id, job.tool, info)
