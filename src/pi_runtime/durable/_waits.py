"""Waits: a session's tool call waiting for a job's result."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import func, select

from . import _jobs, _rows, _sessions
from . import schema as t
from ._tx import Tx, check_id
from .errors import Conflict, NotFound
from .records import JOB_TERMINAL, WaitRecord


def get_wait(tx: Tx, session_id: str, tool_call_id: str) -> WaitRecord | None:
    row = tx.find(t.waits, session_id=session_id, tool_call_id=tool_call_id)
    return None if row is None else _rows.wait(row)


def list_waits(tx: Tx, session_id: str) -> list[WaitRecord]:
    query = (
        select(t.waits)
        .where(t.waits.c.session_id == session_id)
        .order_by(t.waits.c.created_at, t.waits.c.tool_call_id)
    )
    return [_rows.wait(row) for row in tx.conn.execute(query)]


def register(
    tx: Tx, session_id: str, tool_call_id: str, job_id: str, *, run_id: str | None
) -> WaitRecord:
    """Record that `tool_call_id` waits for `job_id` (the caller holds the session lock).

    Registering the same wait again returns it. A job that already finished has its event
    in the outbox (written with its ending; re-created here if somehow missing), so the
    result is still delivered: `job_done` says so.
    """
    check_id("tool_call_id", tool_call_id)
    job = tx.find(t.jobs, "wait", id=job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    if job.session_id is not None and job.session_id != session_id:
        raise Conflict(f"job {job_id!r} belongs to session {job.session_id!r}")
    done = job.status in JOB_TERMINAL
    existing = get_wait(tx, session_id, tool_call_id)
    if existing is not None:
        if existing.job_id != job_id:
            raise Conflict(f"tool call {tool_call_id!r} already waits for job {existing.job_id!r}")
        return replace(existing, job_done=done)
    other = tx.conn.execute(
        select(t.waits.c.tool_call_id).where(t.waits.c.job_id == job_id)
    ).first()
    if other is not None:
        raise Conflict(f"job {job_id!r} is already awaited by tool call {other.tool_call_id!r}")
    if _sessions.has_result(tx, session_id, tool_call_id):
        raise Conflict(f"tool call {tool_call_id!r} already has a result")
    tx.conn.execute(
        t.waits.insert().values(
            session_id=session_id,
            tool_call_id=tool_call_id,
            job_id=job_id,
            run_id=run_id,
            status="pending",
            created_at=tx.now,
        )
    )
    if done:
        _jobs.ensure_event(tx, job)
    wait = get_wait(tx, session_id, tool_call_id)
    assert wait is not None
    return replace(wait, job_done=done)


def count(tx: Tx, run_id: str) -> int:
    return int(
        tx.conn.execute(
            select(func.count()).select_from(t.waits).where(t.waits.c.run_id == run_id)
        ).scalar_one()
    )


def resolve(tx: Tx, wait: WaitRecord, status: str, event_id: int | None) -> None:
    tx.change(
        t.waits,
        {"session_id": wait.session_id, "tool_call_id": wait.tool_call_id},
        status=status,
        event_id=event_id,
        resolved_at=tx.now,
    )
