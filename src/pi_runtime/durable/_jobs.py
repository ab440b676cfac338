"""Jobs: async tool calls run by workers under leases, ending with an outbox event.

Every ending of a job (success, failure, cancellation, unknown outcome) writes its outbox
event in the same transaction, so a result can never exist without its notice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from sqlalchemy import Row, bindparam, func, select
from sqlalchemy.exc import IntegrityError

from ..exceptions import UserError
from ..messages import ToolErrorKind
from . import _rows
from . import schema as t
from ._leasing import claim_of, claim_under_lease, queued_or_expired
from ._stmts import NOW, key
from ._stops import job_key
from ._tx import Tx, check_id, check_json, check_lease, new_id
from .errors import Conflict, LeaseLost, NotFound
from .records import JOB_TERMINAL, JobEnding, JobRecord

UNKNOWN_OUTCOME = {
    "kind": ToolErrorKind.OUTCOME_UNKNOWN.value,
    "message": "the worker running this call stopped before it finished; "
    "whether its side effect happened cannot be confirmed",
    "hint": "check the effect before calling the tool again",
}


_INSERT_EVENT = t.outbox.insert().returning(t.outbox.c.id)
_FINISH = t.jobs.update().where(t.jobs.c.id == bindparam(key("id"))).returning(*t.jobs.c)


class Ended(NamedTuple):
    """A job just ended: as stored, and the id of the outbox event written with it."""

    job: JobRecord
    event_id: int


def get_job(tx: Tx, job_id: str) -> JobRecord | None:
    row = tx.find(t.jobs, id=job_id)
    return None if row is None else _rows.job(row)


def list_jobs(tx: Tx, session_id: str) -> list[JobRecord]:
    query = (
        select(t.jobs)
        .where(t.jobs.c.session_id == session_id)
        .order_by(t.jobs.c.created_at, t.jobs.c.id)
    )
    return [_rows.job(row) for row in tx.conn.execute(query)]


def _require(tx: Tx, job_id: str) -> JobRecord:
    job = get_job(tx, job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    return job


def enqueue_job(
    tx: Tx,
    *,
    tool: str,
    arguments: dict[str, Any],
    session_id: str | None,
    tool_call_id: str | None,
    retry_safe: bool,
    max_attempts: int,
) -> JobRecord:
    """A queued job. The same tool call enqueued again (a resumed run) gets the same job."""
    check_id("tool", tool)
    if not isinstance(arguments, dict):
        raise UserError("job arguments must be a JSON object")
    check_json("job arguments", arguments)
    if max_attempts < 1:
        raise UserError(f"max_attempts must be at least 1, got {max_attempts}")
    if (session_id is None) != (tool_call_id is None):
        raise UserError("give a job both session_id and tool_call_id, or neither")
    if session_id is not None and tool_call_id is not None:
        check_id("tool_call_id", tool_call_id)
        if tx.conn.execute(select(t.sessions.c.id).where(t.sessions.c.id == session_id)).first():
            existing = _for_call(tx, session_id, tool_call_id)
            if existing is not None:
                return _same_call(existing, tool, arguments)
        else:
            raise NotFound(f"no session {session_id!r}")
    job_id = new_id("job")
    values = {
        "id": job_id,
        "session_id": session_id,
        "tool_call_id": tool_call_id,
        "tool": tool,
        "arguments": arguments,
        "status": "queued",
        "retry_safe": retry_safe,
        "max_attempts": max_attempts,
        "attempts": 0,
        "created_at": tx.now,
        "updated_at": tx.now,
    }
    try:
        # A savepoint: a concurrent enqueue of the same call loses the insert, not the tx.
        with tx.conn.begin_nested():
            tx.conn.execute(t.jobs.insert().values(**values))
        tx.notify()
    except IntegrityError:
        if session_id is None or tool_call_id is None:
            raise
        existing = _for_call(tx, session_id, tool_call_id)
        if existing is None:
            raise
        return _same_call(existing, tool, arguments)
    return _require(tx, job_id)


def _for_call(tx: Tx, session_id: str, tool_call_id: str) -> JobRecord | None:
    row = tx.conn.execute(
        select(t.jobs).where(
            t.jobs.c.session_id == session_id, t.jobs.c.tool_call_id == tool_call_id
        )
    ).one_or_none()
    return None if row is None else _rows.job(row)


def _same_call(job: JobRecord, tool: str, arguments: dict[str, Any]) -> JobRecord:
    if job.tool != tool or job.arguments != arguments:
        raise Conflict(f"tool call {job.tool_call_id!r} already started job {job.id!r} differently")
    return job


CLAIMABLE_JOBS = queued_or_expired(t.jobs)

_CLAIM = claim_of(
    t.jobs,
    CLAIMABLE_JOBS,
    oldest=t.jobs.c.created_at,
    values={
        "status": "running",
        "started_at": func.coalesce(t.jobs.c.started_at, NOW),
        "updated_at": NOW,
    },
    vetted=("status", "retry_safe", "attempts", "max_attempts"),
)


def claim_jobs(tx: Tx, owners: Sequence[str], lease_s: float) -> list[JobRecord]:
    """Take the oldest queued jobs, or ones whose holder's lease expired, one per owner.

    An expired attempt of a job that is not retry-safe ends `outcome_unknown` instead (its
    side effect may have happened); one that used all its attempts ends `failed`.
    """

    def vet(row: Row[Any]) -> bool:
        if row.status != "running":
            return True
        # Its holder's lease ran out: the attempt was cut short.
        if not row.retry_safe:
            finish(tx, row, "outcome_unknown", error=UNKNOWN_OUTCOME)
            return False
        if row.attempts >= row.max_attempts:
            error = {
                "kind": ToolErrorKind.ATTEMPTS_EXHAUSTED.value,
                "message": f"the job was interrupted {row.attempts} times",
                "hint": "",
            }
            finish(tx, row, "failed", error=error)
            return False
        return True

    claimed = claim_under_lease(tx, _CLAIM, owners=owners, lease_s=lease_s, vet=vet)
    return [_rows.job(row) for row in claimed]


def held(tx: Tx, job_id: str, owner: str) -> Row[Any]:
    """The job's row, locked, if `owner` holds it (LeaseLost otherwise)."""
    row = tx.find(t.jobs, "wait", id=job_id)
    if row is None:
        raise NotFound(f"no job {job_id!r}")
    if row.status != "running" or row.lease_owner != owner:
        raise LeaseLost(f"job {job_id!r} is not held by {owner!r} (it is {row.status})")
    return row


def renew_lease(
    tx: Tx, job_id: str, owner: str, lease_s: float, checkpoint: Any = None, save: bool = False
) -> JobRecord:
    """Extend the lease (and, with `save`, commit `checkpoint` with it)."""
    check_lease(lease_s)
    held(tx, job_id, owner)
    values: dict[str, Any] = {"lease_expires_at": tx.until(lease_s), "updated_at": tx.now}
    if save:
        values["checkpoint"] = check_json("checkpoint", checkpoint)
    tx.conn.execute(t.jobs.update().where(t.jobs.c.id == job_id).values(**values))
    return _require(tx, job_id)


def release(tx: Tx, job_id: str, owner: str) -> JobRecord:
    """Give a held job back at once (its attempt was cut short): the next claim takes it
    over as it would after the lease ran out. The owner is cleared too: a write of the
    cut-short attempt still in flight (a checkpoint begun before this) is fenced out,
    rather than renewing the lease it gave back."""
    held(tx, job_id, owner)
    tx.conn.execute(
        t.jobs.update()
        .where(t.jobs.c.id == job_id)
        .values(lease_owner=None, lease_expires_at=tx.now, updated_at=tx.now)
    )
    tx.notify()
    return _require(tx, job_id)


def cancel(tx: Tx, job_id: str, message: str) -> JobRecord:
    """End a job that has not finished as `cancelled` (with its event); a worker running
    it loses its lease and writes nothing more. A finished job stays as it is."""
    row = tx.find(t.jobs, "wait", id=job_id)
    if row is None:
        raise NotFound(f"no job {job_id!r}")
    if row.status in JOB_TERMINAL:
        return _rows.job(row)
    error = {"kind": ToolErrorKind.CANCELLED.value, "message": message, "hint": ""}
    return _cancel(tx, row, error)


def _cancel(tx: Tx, row: Row[Any], error: dict[str, Any]) -> JobRecord:
    """End the unfinished job `row` (locked) as cancelled; its worker, if one runs it, is
    told at once (`Tx.stop`)."""
    if row.status == "running":
        tx.stop(job_key(row.id))
    return finish(tx, row, "cancelled", error=error).job


def complete(
    tx: Tx, job_id: str, owner: str, result: Any, max_result_bytes: int | None = None
) -> JobRecord:
    ending = JobEnding(status="succeeded", result=result, max_result_bytes=max_result_bytes)
    return end(tx, held(tx, job_id, owner), check_ending(ending)).job


def fail(tx: Tx, job_id: str, owner: str, error: dict[str, Any], status: str) -> JobRecord:
    ending = JobEnding(status=status, error=error)  # type: ignore[arg-type]  # checked next
    return end(tx, held(tx, job_id, owner), check_ending(ending)).job


def check_ending(ending: JobEnding) -> JobEnding:
    """`ending` if it can be written (UserError naming what is wrong otherwise)."""
    if ending.status == "succeeded":
        check_json("job result", ending.result)
        cap = ending.max_result_bytes
        if cap is not None and (type(cap) is not int or cap < 1):
            raise UserError(f"max_result_bytes must be a positive int, got {cap!r}")
        return ending
    if ending.status not in ("failed", "outcome_unknown"):
        raise UserError(f"a job fails as failed or outcome_unknown, not {ending.status!r}")
    if ending.error is None:
        raise UserError("a job that fails carries its error")
    return replace(ending, error=check_error(ending.error))


def end(
    tx: Tx, job: Row[Any], ending: JobEnding, *, notify: bool = True, outcome: str | None = None
) -> Ended:
    """End a held job as a checked `ending` says, with its outbox event (`finish`)."""
    if ending.status == "succeeded":
        return finish(tx, job, "succeeded", result=ending.result, outcome=outcome,
                      max_result_bytes=ending.max_result_bytes, notify=notify)  # fmt: skip
    return finish(tx, job, ending.status, error=ending.error, notify=notify, outcome=outcome)


def check_error(error: dict[str, Any]) -> dict[str, Any]:
    """A job error as the model will read it: `kind`, `message`, optional `hint`."""
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("kind"), str)
        or not isinstance(error.get("message"), str)
    ):
        raise UserError("a job error is a JSON object with string `kind` and `message`")
    return dict(check_json("job error", error))


def finish(
    tx: Tx,
    job: Row[Any],
    status: str,
    *,
    result: Any = None,
    error: dict[str, Any] | None = None,
    max_result_bytes: int | None = None,
    notify: bool = True,
    outcome: str | None = None,
) -> Ended:
    """End a job (the caller holds its row) and write its outbox event, together.
    `notify`: tell workers the event may be claimable (False: the caller delivers it).
    `outcome`: the event is written delivered with this outcome (the caller delivers it
    in this transaction, and decided how)."""
    params = {
        key("id"): job.id,
        "status": status,
        "result": result,
        "error": error,
        "lease_owner": None,
        "lease_expires_at": None,
        "finished_at": tx.now,
        "updated_at": tx.now,
    }
    ended = tx.conn.execute(_FINISH, params).one()
    event = _event(job.id, status, error, tx, max_result_bytes)
    if outcome is not None:
        event.update(delivered_at=tx.now, outcome=outcome)
    (event_id,) = tx.conn.execute(_INSERT_EVENT, event).one()
    if notify:
        tx.notify()
    return Ended(_rows.job(ended), event_id)


def _event(
    job_id: str,
    status: str,
    error: dict[str, Any] | None,
    tx: Tx,
    max_result_bytes: int | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {"status": status}
    if error is not None:
        payload["error"] = error
    if max_result_bytes is not None:
        payload["max_result_bytes"] = max_result_bytes
    return {
        "job_id": job_id,
        "kind": "completed" if status == "succeeded" else "failed",
        "payload": payload,
        "created_at": tx.now,
        "attempts": 0,
    }


def ensure_event(tx: Tx, job: Row[Any]) -> None:
    """Write the outbox event of a finished job if it has none (the caller holds its row)."""
    has = tx.conn.execute(select(t.outbox.c.id).where(t.outbox.c.job_id == job.id)).first()
    if has is None:
        tx.conn.execute(_INSERT_EVENT, _event(job.id, job.status, job.error, tx))
    tx.notify()  # awaited now: claimable


def cancel_unfinished(tx: Tx, session_id: str) -> list[str]:
    """Cancel the session's jobs that have not finished: queued ones, and running ones,
    whose workers are told at once and write nothing more (their results would be
    ignored anyway).

    The caller holds the session's lock; a job's lock is waited for (its other holders,
    a claim or a renewal, never wait for a session lock), so a job being claimed right
    now is cancelled once its claim commits, not passed over."""
    rows = tx.conn.execute(
        tx.lock(
            select(t.jobs).where(
                t.jobs.c.session_id == session_id, t.jobs.c.status.in_(("queued", "running"))
            )
        )
    ).all()
    error = {
        "kind": ToolErrorKind.CANCELLED.value,
        "message": "the session was cancelled",
        "hint": "",
    }
    return [_cancel(tx, row, error).id for row in rows]
