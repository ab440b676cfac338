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


def anything_claimable(tx: Tx) -> bool:
    """Whether a claim could find something now (it may still lose the race for it)."""
    query = select(
        exists().where(_delivery.claimable_events(tx.now))
        | exists().where(_runs.claimable_runs(tx.now))
        | exists().where(_jobs.claimable_jobs(tx.now))
    )
    return bool(tx.conn.execute(query).scalar())


def claim_work(tx: Tx, owner: str, lease_s: float, max_attempts: int) -> Work | None:
    return (
        _delivery.claim_event(tx, owner, lease_s)
        or _runs.claim_run(tx, owner, lease_s, max_attempts)
        or _jobs.claim_job(tx, owner, lease_s)
    )
