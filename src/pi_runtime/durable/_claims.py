"""Claiming any work at once: the worker's one look, most urgent first.

Outbox events (quick, and they unblock conversations), then runs (continuations, or runs
whose holder died), then jobs: one transaction instead of three, and one piece of work
for each owner given (a worker claims for all its idle slots at once). On SQLite a look
first reads whether anything is claimable, so idle workers never take the write lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import exists, select

from . import _delivery, _jobs, _runs
from ._tx import Tx
from .records import JobRecord, OutboxEvent, RunRecord

Work = OutboxEvent | RunRecord | JobRecord


_KINDS = select(
    exists().where(_delivery.CLAIMABLE_EVENTS).label("events"),
    exists().where(_runs.CLAIMABLE_RUNS).label("runs"),
    exists().where(_jobs.CLAIMABLE_JOBS).label("jobs"),
)


def anything_claimable(tx: Tx) -> bool:
    """Whether a claim could find something now (it may still lose the race for it)."""
    return any(tx.conn.execute(_KINDS, {"now": tx.now}).one())


def claim_work(tx: Tx, owners: Sequence[str], lease_s: float, max_attempts: int) -> list[Work]:
    """Up to one piece of work per owner, most urgent first; the k-th held by `owners[k]`.

    It first reads which kinds there are to claim, in one statement: events and runs are
    rare (a job's result is delivered, and its continuation taken, as the job ends), so
    a look for each would mostly find nothing, and an idle worker's claim is one read.
    A kind that appears after that read waits for the next claim."""
    kinds = tx.conn.execute(_KINDS, {"now": tx.now}).one()
    work: list[Work] = []
    if kinds.events:
        work += _delivery.claim_events(tx, owners, lease_s)
    if kinds.runs and len(work) < len(owners):
        work += _runs.claim_runs(tx, owners[len(work) :], lease_s, max_attempts)
    if kinds.jobs and len(work) < len(owners):
        work += _jobs.claim_jobs(tx, owners[len(work) :], lease_s)
    return work
