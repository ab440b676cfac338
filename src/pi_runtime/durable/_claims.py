"""Claiming any work at once: the worker's one look, most urgent first.

An outbox event (quick, and it unblocks a conversation), else a run (a continuation, or
a run whose holder died), else a job. One transaction instead of three. On SQLite a
look first reads whether anything is claimable, so idle workers never take the write
lock.
"""

from __future__ import annotations

from sqlalchemy import exists, select

from . import _delivery, _jobs, _runs
from ._tx import Tx
from .records import JobRecord, OutboxEvent, RunRecord

Work = OutboxEvent | RunRecord | JobRecord


_ANY = select(
    exists().where(_delivery.CLAIMABLE_EVENTS)
    | exists().where(_runs.CLAIMABLE_RUNS)
    | exists().where(_jobs.CLAIMABLE_JOBS)
)


def anything_claimable(tx: Tx) -> bool:
    """Whether a claim could find something now (it may still lose the race for it)."""
    return bool(tx.conn.execute(_ANY, {"now": tx.now}).scalar())


def claim_work(tx: Tx, owner: str, lease_s: float, max_attempts: int) -> Work | None:
    return (
        _delivery.claim_event(tx, owner, lease_s)
        or _runs.claim_run(tx, owner, lease_s, max_attempts)
        or _jobs.claim_job(tx, owner, lease_s)
    )
