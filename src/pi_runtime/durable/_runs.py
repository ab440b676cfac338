"""Runs of a session: created or queued, claimed with a lease, finished, continued."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BindParameter, Row, bindparam, func, literal_column, select, union_all

from ..exceptions import UserError
from ..messages import AssistantMessage, Message
from ..tools import PendingApproval
from . import _approvals, _jobs, _rows, _sessions, _waits
from . import schema as t
from ._leasing import claim_of, claim_under_lease, queued_or_expired
from ._stmts import NOW, key
from ._stops import run_key
from ._tx import Tx, check_id, check_json, check_lease, new_id
from .errors import Conflict, LeaseLost, NotFound
from .records import (
    JOB_TERMINAL,
    RUN_FINAL,
    SESSION_READY,
    FinishedRun,
    RunRecord,
    TurnInputs,
    requested_runs,
)

_END = t.runs.update().where(t.runs.c.id == bindparam(key("id"))).returning(*t.runs.c)
_INSERT_RUN = t.runs.insert().returning(*t.runs.c)
_PARENT: BindParameter[str] = bindparam(key("parent_run_id"))
_PROGRESS = union_all(
    select(literal_column("'run'").label("what"), t.runs.c.status).where(t.runs.c.id == _PARENT),
    select(literal_column("'wait'"), t.waits.c.status)
    .where(t.waits.c.run_id == _PARENT)
    .distinct(),
    select(literal_column("'approval'"), t.approvals.c.status)
    .where(t.approvals.c.run_id == _PARENT)
    .distinct(),
    select(literal_column("'child'"), t.runs.c.status).where(t.runs.c.parent_run_id == _PARENT),
)
"""Whether a run can be continued, in one statement: its status, its waits' and approvals'
distinct statuses, and whether a continuation of it exists. Four statements before, on the
way of every job."""

_MAX_CHAIN = 10_000  # continuations a request may pass through: a guard, never reached

_CHAIN = (
    select(t.runs.c.id, t.runs.c.parent_run_id, t.runs.c.kind, literal_column("1").label("depth"))
    .where(t.runs.c.id == _PARENT)
    .cte("chain", recursive=True)
)
_CHAIN = _CHAIN.union_all(
    select(t.runs.c.id, t.runs.c.parent_run_id, t.runs.c.kind, _CHAIN.c.depth + 1).where(
        t.runs.c.id == _CHAIN.c.parent_run_id,
        _CHAIN.c.kind != "user",
        _CHAIN.c.depth < _MAX_CHAIN,
    )
)
_REQUESTED = select(t.runs).join(_CHAIN, _CHAIN.c.id == t.runs.c.id)
"""The runs a request came through, from a run's parent up to the user run that made
the request: one statement however many continuations there were (one a run before:
the k-th continuation of a request read k runs)."""

# The session status a finished run leaves behind.
_SESSION_AFTER = {
    "completed": "completed",
    "stopped": "stopped",
    "failed": "failed",
    "awaiting": "awaiting_server_tool",
}


def turn_inputs(tx: Tx, run: RunRecord) -> TurnInputs:
    parent = run.parent_run_id if run.kind == "server_result" else None
    return TurnInputs(
        messages=_sessions.load_messages(tx, run.session_id, known=True),
        requested=_requested(tx, run),
        approvals=[]
        if parent is None or parent in tx.no_decisions
        else [a for a in _approvals.list_for(tx, run.session_id) if a.run_id == parent],
    )


def _requested(tx: Tx, run: RunRecord) -> list[RunRecord]:
    """`requested_runs(run, ...)`, read in one statement."""
    if run.kind == "user" or run.parent_run_id is None:
        return []
    rows = tx.conn.execute(_REQUESTED, {key("parent_run_id"): run.parent_run_id})
    chain = {r.id: _rows.run(r) for r in rows}  # (a cycle, were one stored, ends it)
    return requested_runs(run, chain.get)


def get_run(tx: Tx, run_id: str) -> RunRecord | None:
    row = tx.find(t.runs, id=run_id)
    return None if row is None else _rows.run(row)


def _require_run(tx: Tx, run_id: str) -> RunRecord:
    run = get_run(tx, run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    return run


def list_runs(tx: Tx, session_id: str) -> list[RunRecord]:
    query = (
        select(t.runs)
        .where(t.runs.c.session_id == session_id)
        .order_by(t.runs.c.created_at, t.runs.c.id)
    )
    return [_rows.run(row) for row in tx.conn.execute(query)]


def create_run(
    tx: Tx,
    session_id: str,
    *,
    input: dict[str, Any] | None,
    owner: str | None,
    lease_s: float,
) -> RunRecord:
    """A user run: queued for a worker, or, with `owner`, already running under its lease."""
    if input is not None:
        check_json("run input", input)
    if owner is not None:
        check_id("owner", owner)
        check_lease(lease_s)
    session = tx.lock_session(session_id)
    if session.status not in SESSION_READY:
        raise Conflict(f"session {session_id!r} is {session.status}; it cannot take a new run now")
    if session.status == "cancelled" and (stopping := winding_up(tx, session_id)) is not None:
        raise StillStoring(
            f"session {session_id!r} was cancelled, and its run {stopping!r} is still "
            "storing what it did; try again in a moment"
        )
    run_id = new_id("run")
    running = owner is not None
    tx.conn.execute(
        t.runs.insert().values(
            id=run_id,
            session_id=session_id,
            kind="user",
            status="running" if running else "queued",
            input=input,
            lease_owner=owner,
            lease_expires_at=tx.until(lease_s) if running else None,
            attempts=1 if running else 0,
            created_at=tx.now,
            started_at=tx.now if running else None,
        )
    )
    tx.set_session_status(session_id, "running" if running else "queued")
    if not running:
        tx.notify()
    return _require_run(tx, run_id)


CLAIMABLE_RUNS = queued_or_expired(t.runs)

_CLAIM = claim_of(
    t.runs,
    CLAIMABLE_RUNS,
    oldest=t.runs.c.created_at,
    values={"status": "running", "started_at": func.coalesce(t.runs.c.started_at, NOW)},
    vetted=("session_id",),
)


def claim_runs(tx: Tx, owners: Sequence[str], lease_s: float, max_attempts: int) -> list[RunRecord]:
    """Take the oldest queued runs, or ones whose holder's lease expired (it died
    mid-run), one per owner and at most one per session.

    A run interrupted `max_attempts` times fails instead of being taken again.
    """
    sessions: set[str] = set()

    def vet(row: Row[Any]) -> bool:
        if row.session_id in sessions:
            return False  # one run of a session at a time
        # Never wait for a session lock here (lock order: session before run).
        if tx.try_lock_session(row.session_id) is None:
            return False
        run = _require_run(tx, row.id)
        if run.status == "running" and run.attempts >= max_attempts:
            _end(tx, run.id, "failed", "internal_error", None)
            tx.set_session_status(run.session_id, "failed")
            return False
        sessions.add(row.session_id)
        return True

    claimed = claim_under_lease(tx, _CLAIM, owners=owners, lease_s=lease_s, vet=vet)
    for row in claimed:
        tx.set_session_status(row.session_id, "running")
    return [_rows.run(row) for row in claimed]


def _held(tx: Tx, run_id: str, owner: str) -> tuple[Row[Any], RunRecord]:
    """The run's session row, locked, and the run as read after the lock, if `owner`
    holds the run (LeaseLost otherwise; NotFound if there is no such run)."""
    session = tx.lock_session_of(t.runs, run_id)
    if session is None:  # every run has a session
        raise NotFound(f"no run {run_id!r}")
    run = _require_run(tx, run_id)
    if run.status != "running" or run.lease_owner != owner:
        raise LeaseLost(f"run {run_id!r} is not held by {owner!r} (it is {run.status})")
    return session, run


def renew_run_lease(tx: Tx, run_id: str, owner: str, lease_s: float) -> RunRecord:
    check_lease(lease_s)
    _held(tx, run_id, owner)
    tx.conn.execute(
        t.runs.update().where(t.runs.c.id == run_id).values(lease_expires_at=tx.until(lease_s))
    )
    return _require_run(tx, run_id)


def release_run(tx: Tx, run_id: str, owner: str) -> RunRecord:
    """Give a held run back at once (it was cut short): the next claim takes it over as
    it would after the lease ran out. The owner is cleared too, so a write of the
    cut-short run still in flight is fenced out rather than renewing the lease."""
    _held(tx, run_id, owner)
    tx.conn.execute(
        t.runs.update()
        .where(t.runs.c.id == run_id)
        .values(lease_owner=None, lease_expires_at=tx.now)
    )
    tx.notify()
    return _require_run(tx, run_id)


def _end(
    tx: Tx, run_id: str, status: str, stop_reason: str | None, result: dict[str, Any] | None
) -> RunRecord:
    params = {
        key("id"): run_id,
        "status": status,
        "stop_reason": stop_reason,
        "result": result,
        "finished_at": tx.now,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    return _rows.run(tx.conn.execute(_END, params).one())


def finish_run(
    tx: Tx,
    run_id: str,
    *,
    owner: str,
    status: str,
    stop_reason: str | None,
    result: dict[str, Any] | None,
    messages: Sequence[Message],
    waits: Sequence[tuple[str, str]],
    approvals: Sequence[PendingApproval] = (),
) -> FinishedRun:
    """End a run the caller holds: its new messages, its waits (on jobs, and on a
    person's decision: `approvals`), its result and the session status, together. A run
    ending `awaiting` whose results all arrived meanwhile is continued at once."""
    if status not in RUN_FINAL:
        raise UserError(f"a run finishes as one of {', '.join(sorted(RUN_FINAL))}, not {status!r}")
    if result is not None:
        check_json("run result", result)
    if (waits or approvals) and status != "awaiting":
        raise UserError("only a run that ends awaiting registers waits")
    session, run = _held(tx, run_id, owner)
    session_id = run.session_id
    after = "awaiting_approval" if approvals else _SESSION_AFTER[status]
    _sessions.append_messages(tx, session_id, messages, run_id=run_id, locked=session, status=after)
    for tool_call_id, job_id in waits:
        _waits.register(tx, session_id, tool_call_id, job_id, run_id=run_id)
    _approvals.register(tx, session_id, run_id, approvals)
    ended = _end(tx, run_id, status, stop_reason, result)
    if status != "awaiting":
        cancelled = _cancel_launched(tx, session_id, messages)
        return FinishedRun(run=ended, continuation=None, jobs_cancelled=cancelled)
    if _waits.count(tx, run_id) == 0 and not approvals:
        raise UserError("a run that ends awaiting must wait for at least one job or decision")
    continuation = queue_continuation(tx, session_id, run_id)
    return FinishedRun(run=ended, continuation=continuation)


def _cancel_launched(tx: Tx, session_id: str, messages: Sequence[Message]) -> tuple[str, ...]:
    """Cancel the unfinished jobs of the run's tool calls: a run that ends without
    awaiting them answered those calls `cancelled`, so nobody will read their results."""
    calls = [call.id for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]
    if not calls:
        return ()
    rows = tx.conn.execute(
        select(t.jobs.c.id).where(
            t.jobs.c.session_id == session_id,
            t.jobs.c.tool_call_id.in_(calls),
            t.jobs.c.status.not_in(sorted(JOB_TERMINAL)),
        )
    ).all()
    message = "the run that started this call ended without waiting for its result"
    return tuple(_jobs.cancel(tx, row.id, message).id for row in rows)


def queue_continuation(
    tx: Tx,
    session_id: str,
    parent_run_id: str,
    *,
    take: tuple[str, float] | None = None,
    set_status: bool = True,
) -> RunRecord | None:
    """Queue the `server_result` run that continues `parent_run_id`, once every result it
    awaits was delivered (none pending, none cancelled) and every call waiting for a
    person was decided. With `take` (owner, lease_s) it starts running under that lease
    instead: the caller runs it without a second claim. `set_status` False: the caller
    sets the session's status to the queued run's own ("queued" or "running") itself, in
    a write of the session row it makes anyway."""
    found: dict[str, set[str]] = {"run": set(), "wait": set(), "approval": set(), "child": set()}
    for row in tx.conn.execute(_PROGRESS, {key("parent_run_id"): parent_run_id}):
        found[row.what].add(row.status)
    if not found["run"]:
        raise NotFound(f"no run {parent_run_id!r}")
    if found["run"] != {"awaiting"}:
        return None  # still running: its own finish will continue it
    states, decisions = found["wait"], found["approval"]
    if not states and not decisions:
        return None
    if states - {"delivered"}:  # still waiting, or the wait was cancelled
        return None
    if decisions - {"approved", "rejected"}:  # a person has yet to decide, or cancelled
        return None
    if not decisions:
        tx.no_decisions.add(parent_run_id)
    if found["child"]:
        return None  # continued already
    run_id = new_id("run")
    values: dict[str, Any] = {"status": "queued", "attempts": 0}
    if take is not None:
        values = {"status": "running", "lease_owner": take[0], "attempts": 1,
                  "lease_expires_at": tx.until(take[1]), "started_at": tx.now}  # fmt: skip
    values.update(id=run_id, session_id=session_id, kind="server_result",
                  parent_run_id=parent_run_id, created_at=tx.now)  # fmt: skip
    row = tx.conn.execute(_INSERT_RUN, values).one()
    if set_status:
        tx.set_session_status(session_id, row.status)
    if take is None:
        tx.notify()
    return _rows.run(row)


def cancel_runs(tx: Tx, session_id: str) -> list[str]:
    """Stop the session's queued, running and awaiting runs (the caller holds the session
    lock).

    A running run whose holder's lease is live stays leased to it, stopped: the holder is
    told at once (`Tx.stop`), cancels its work and stores what the run did, as cancelled
    (`finish_cancelled_run`), while its lease lasts; no new run of the session starts
    meanwhile (`create_run`). One whose lease ran out (its holder is presumed dead) just
    stops, as does a queued one. An awaiting run keeps its result."""
    rows = tx.conn.execute(
        select(t.runs.c.id, t.runs.c.status, t.runs.c.lease_expires_at).where(
            t.runs.c.session_id == session_id,
            t.runs.c.status.in_(("queued", "running", "awaiting")),
        )
    ).all()
    for row in rows:
        if row.status == "awaiting":
            tx.change(t.runs, {"id": row.id}, status="stopped", stop_reason="cancelled")
        elif row.status == "running" and row.lease_expires_at >= tx.now:
            tx.change(
                t.runs, {"id": row.id}, status="stopped", stop_reason="cancelled",
                finished_at=tx.now,
            )  # fmt: skip
            tx.stop(run_key(row.id))
        else:
            _end(tx, row.id, "stopped", "cancelled", None)
    return [row.id for row in rows]


class StillStoring(Conflict):
    """A new run was refused: a run a cancel stopped is still storing what it did."""


def winding_up(tx: Tx, session_id: str) -> str | None:
    """The run of the session a cancel stopped whose holder may still store what it did
    (under a live lease), if any."""
    return tx.conn.execute(
        select(t.runs.c.id)
        .where(
            t.runs.c.session_id == session_id,
            t.runs.c.status == "stopped",
            t.runs.c.lease_owner.is_not(None),
            t.runs.c.lease_expires_at >= tx.now,
        )
        .limit(1)
    ).scalar_one_or_none()


def finish_cancelled_run(
    tx: Tx,
    run_id: str,
    *,
    owner: str,
    result: dict[str, Any] | None,
    messages: Sequence[Message],
) -> FinishedRun:
    """Store what a run stopped by a cancel did: its new messages (every call answered)
    and its result. Only its holder at the cancel may, once, while its lease lasts
    (LeaseLost otherwise: a run taken over, or one whose holder was presumed dead, stores
    nothing). The session keeps its status; the run stays `stopped` / `cancelled`."""
    if result is not None:
        check_json("run result", result)
    session = tx.lock_session_of(t.runs, run_id)
    if session is None:
        raise NotFound(f"no run {run_id!r}")
    run = _require_run(tx, run_id)
    if (
        run.status != "stopped"
        or run.stop_reason != "cancelled"
        or run.lease_owner != owner
        or run.lease_expires_at is None
        or run.lease_expires_at < tx.now
    ):
        raise LeaseLost(f"run {run_id!r} is not held by {owner!r} (it is {run.status})")
    _sessions.append_messages(tx, run.session_id, messages, run_id=run_id, locked=session)
    tx.change(t.runs, {"id": run_id}, result=result, lease_owner=None, lease_expires_at=None)
    cancelled = _cancel_launched(tx, run.session_id, messages)
    return FinishedRun(run=_require_run(tx, run_id), continuation=None, jobs_cancelled=cancelled)
