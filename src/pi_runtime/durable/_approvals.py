"""Approvals: a session's tool calls waiting for a person, and the decisions on them.

A run ending `awaiting_approval` registers its pending calls with its other waits. A
decision is taken once, under the session's lock:

- approve: the approval is marked in the same transaction that makes the call a job of
  the session, already running under the approver's lease, and registers the wait for
  it. The approver then runs the tool and `settle`s: the job's ending, its outbox event
  and the delivery of the result (and the continuation, when nothing else is awaited),
  in one transaction. If the approver dies in between, the job's lease runs out and a
  worker takes it over like any interrupted job: a call that is not idempotent ends
  `outcome_unknown` rather than run twice.
- reject: the approval is marked and the `rejected` tool error appended, together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, select

from ..messages import ToolErrorKind, ToolResultMessage, tool_error_info, tool_error_result
from ..tools import PendingApproval, fingerprint
from . import _delivery, _jobs, _rows, _runs, _sessions, _waits
from . import schema as t
from ._stmts import key
from ._tx import Tx, check_id, check_json, check_lease
from .errors import Conflict, NotFound
from .records import ApprovalRecord, Decided

Take = tuple[str, float]

_OF_SESSION = (
    select(t.approvals)
    .where(t.approvals.c.session_id == bindparam(key("session_id")))
    .order_by(t.approvals.c.created_at, t.approvals.c.tool_call_id)
)
_STATES = (
    select(t.approvals.c.status).where(t.approvals.c.run_id == bindparam(key("run_id"))).distinct()
)


def get(tx: Tx, session_id: str, tool_call_id: str) -> ApprovalRecord | None:
    row = tx.find(t.approvals, session_id=session_id, tool_call_id=tool_call_id)
    return None if row is None else _rows.approval(row)


def list_for(tx: Tx, session_id: str) -> list[ApprovalRecord]:
    rows = tx.conn.execute(_OF_SESSION, {key("session_id"): session_id})
    return [_rows.approval(row) for row in rows]


def register(tx: Tx, session_id: str, run_id: str, pending: Sequence[PendingApproval]) -> None:
    """Record the calls run `run_id` leaves waiting for a decision (the caller holds the
    session lock)."""
    for item in pending:
        check_id("tool_call_id", item.call_id)
        check_json("approval arguments", item.arguments)
        if not item.intact:
            raise Conflict(f"call {item.call_id!r}: its arguments do not match its fingerprint")
        if get(tx, session_id, item.call_id) is not None:
            raise Conflict(f"tool call {item.call_id!r} already waited for a decision")
        if _sessions.has_result(tx, session_id, item.call_id):
            raise Conflict(f"tool call {item.call_id!r} already has a result")
        tx.conn.execute(
            t.approvals.insert().values(
                session_id=session_id,
                tool_call_id=item.call_id,
                run_id=run_id,
                tool=item.tool,
                arguments=item.arguments,
                fingerprint=item.fingerprint,
                status="pending",
                created_at=tx.now,
            )
        )


def states(tx: Tx, run_id: str) -> set[str]:
    """The distinct statuses of the approvals a run registered."""
    return {row.status for row in tx.conn.execute(_STATES, {key("run_id"): run_id})}


def count(tx: Tx, run_id: str) -> int:
    query = select(t.approvals.c.tool_call_id).where(t.approvals.c.run_id == run_id)
    return len(tx.conn.execute(query).all())


def _pending(tx: Tx, session_id: str, tool_call_id: str, expected: str | None) -> ApprovalRecord:
    """The call's approval if a decision may be taken on it now (else NotFound/Conflict)."""
    session = _sessions.get_session(tx, session_id)
    assert session is not None  # the caller locked it
    approval = get(tx, session_id, tool_call_id)
    if approval is None:
        waiting = [a.tool_call_id for a in list_for(tx, session_id) if a.status == "pending"]
        if not waiting:
            raise NotFound(
                f"session {session_id!r} is {session.status}: no call waits for approval"
            )
        raise NotFound(
            f"no call {tool_call_id!r} waits for approval in session {session_id!r}; "
            f"waiting: {', '.join(waiting)}"
        )
    if approval.status != "pending":
        when = approval.decided_at.isoformat() if approval.decided_at else "earlier"
        raise Conflict(f"call {tool_call_id!r} was already {approval.status} ({when})")
    if fingerprint(approval.arguments) != approval.fingerprint:
        raise Conflict(
            f"call {tool_call_id!r}: its stored arguments no longer match their fingerprint; "
            "refusing to decide on arguments nobody reviewed"
        )
    if expected is not None and expected != approval.fingerprint:
        raise Conflict(
            f"call {tool_call_id!r}: stale fingerprint: the call waiting has fingerprint "
            f"{approval.fingerprint}, not {expected}; review it again"
        )
    return approval


def _mark(tx: Tx, approval: ApprovalRecord, **values: Any) -> ApprovalRecord:
    tx.conn.execute(
        t.approvals.update()
        .where(
            t.approvals.c.session_id == approval.session_id,
            t.approvals.c.tool_call_id == approval.tool_call_id,
        )
        .values(decided_at=tx.now, **values)
    )
    marked = get(tx, approval.session_id, approval.tool_call_id)
    assert marked is not None
    return marked


def _still_waiting(tx: Tx, session_id: str, run_id: str) -> None:
    """The session's status while run `run_id` still waits for something."""
    status = "awaiting_approval" if "pending" in states(tx, run_id) else "awaiting_server_tool"
    tx.set_session_status(session_id, status)


def approve(
    tx: Tx,
    session_id: str,
    tool_call_id: str,
    *,
    arguments: dict[str, Any],
    expected: str | None,
    owner: str,
    lease_s: float,
    retry_safe: bool,
    max_attempts: int,
) -> ApprovalRecord:
    """Approve the call with `arguments`: it becomes a job of the session running under
    `owner`'s lease, awaited by the waiting run (one transaction)."""
    check_id("owner", owner)
    check_lease(lease_s)
    check_json("approved arguments", arguments)
    tx.lock_session(session_id)
    approval = _pending(tx, session_id, tool_call_id, expected)
    job = _jobs.enqueue_job(
        tx,
        tool=approval.tool,
        arguments=arguments,
        session_id=session_id,
        tool_call_id=tool_call_id,
        retry_safe=retry_safe,
        max_attempts=max_attempts,
    )
    # the approver runs it now: no worker may claim it while the lease holds
    tx.conn.execute(
        t.jobs.update()
        .where(t.jobs.c.id == job.id)
        .values(
            status="running",
            lease_owner=owner,
            lease_expires_at=tx.until(lease_s),
            attempts=1,
            started_at=tx.now,
            updated_at=tx.now,
        )
    )
    _waits.register(tx, session_id, tool_call_id, job.id, run_id=approval.run_id)
    approved = _mark(tx, approval, status="approved", decided_arguments=arguments, job_id=job.id)
    _still_waiting(tx, session_id, approval.run_id)
    return approved


def settle(
    tx: Tx, session_id: str, tool_call_id: str, message: ToolResultMessage, *, take: Take
) -> Decided:
    """The approved call ran (its job held by `take`'s owner): end the job, write and
    deliver its event with `message` under the original call id, and queue the
    continuation (running under `take`) if nothing else is awaited — one transaction.
    LeaseLost if the job is no longer the owner's (a worker took it over)."""
    owner, lease_s = take
    check_lease(lease_s)
    tx.lock_session(session_id)
    approval = get(tx, session_id, tool_call_id)
    if approval is None or approval.status != "approved" or approval.job_id is None:
        raise Conflict(f"call {tool_call_id!r} of session {session_id!r} was not approved")
    if message.tool_call_id != tool_call_id:
        raise Conflict(f"the result answers call {message.tool_call_id!r}, not {tool_call_id!r}")
    row = _jobs.held(tx, approval.job_id, owner)
    if message.is_error and message.error is not None:
        error = {"kind": message.error.kind, "message": message.error.message}
        ended = _jobs.finish(tx, row, "failed", error={**error, "hint": message.error.hint})
    else:
        ended = _jobs.finish(tx, row, "succeeded", result=message.content)
    delivery = _delivery.deliver(tx, ended.event_id, message, take)
    return Decided(approval=approval, continuation=delivery.continuation)


def reject(
    tx: Tx,
    session_id: str,
    tool_call_id: str,
    *,
    reason: str,
    message: ToolResultMessage,
    expected: str | None,
    take: Take | None,
) -> Decided:
    """Reject the call: answer it with `message` (a `rejected` tool error), and queue
    the continuation if nothing else is awaited — one transaction."""
    if take is not None:
        check_id("owner", take[0])
        check_lease(take[1])
    session = tx.lock_session(session_id)
    approval = _pending(tx, session_id, tool_call_id, expected)
    if message.tool_call_id != tool_call_id or not message.is_error:
        raise Conflict(f"a rejection answers call {tool_call_id!r} with a tool error")
    _sessions.append_messages(tx, session_id, [message], run_id=approval.run_id, locked=session)
    rejected = _mark(tx, approval, status="rejected", reason=reason)
    continuation = _runs.queue_continuation(tx, session_id, approval.run_id, take=take)
    if continuation is None:
        _still_waiting(tx, session_id, approval.run_id)
    return Decided(approval=rejected, continuation=continuation)


def cancel_pending(tx: Tx, session_id: str) -> list[ToolResultMessage]:
    """Cancel the session's pending approvals (the caller holds its lock); the answers
    their calls get, for the caller to append."""
    info = tool_error_info(
        ToolErrorKind.CANCELLED, "the session was cancelled before a person decided on this call"
    )
    answers = []
    for approval in list_for(tx, session_id):
        if approval.status != "pending":
            continue
        _mark(tx, approval, status="cancelled")
        if not _sessions.has_result(tx, session_id, approval.tool_call_id):
            answers.append(tool_error_result(approval.tool_call_id, approval.tool, info))
    return answers
