"""Claiming a row under a lease: the one loop that job, run and outbox claims share.

A claim looks at the oldest claimable row nobody else has locked, lets the caller vet it
(settle an expired attempt, or pass over a busy session), then moves it under the new
lease with a conditional update, so of claimers racing for a row exactly one gets it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import ColumnElement, Row, Table, select

from ._tx import Tx, check_id, check_lease

MAX_SWEEP = 32  # candidates a claim may settle or pass over before giving up for now


def claim_under_lease(
    tx: Tx,
    table: Table,
    claimable: ColumnElement[bool],
    *,
    oldest: ColumnElement[Any],
    owner: str,
    lease_s: float,
    vet: Callable[[Row[Any]], bool] = lambda row: True,
    still: ColumnElement[bool] | None = None,
    values: Mapping[str, Any] | None = None,
) -> Row[Any] | None:
    """The `oldest`-first `claimable` row, now held by `owner` for `lease_s` with one
    more attempt; None when there is none.

    Args:
        vet: False passes over a candidate (the callback may have settled it).
        still: what the row must still satisfy when taken (default: `claimable`).
        values: more columns the take sets (e.g. `started_at`).
    """
    check_id("owner", owner)
    check_lease(lease_s)
    passed: list[Any] = []
    for _ in range(MAX_SWEEP):
        # One row at a time: locking a batch would hide the rest from other claimers.
        query = select(table).where(claimable)
        if passed:
            query = query.where(table.c.id.not_in(passed))
        row = tx.conn.execute(tx.skip_locked(query.order_by(oldest).limit(1))).one_or_none()
        if row is None:
            return None
        passed.append(row.id)
        if not vet(row):
            continue
        # Conditional: only one claimer can move the row (the others get no row back).
        taken = tx.conn.execute(
            table.update()
            .where(table.c.id == row.id, claimable if still is None else still)
            .values(
                lease_owner=owner,
                lease_expires_at=tx.until(lease_s),
                attempts=table.c.attempts + 1,
                **(values or {}),
            )
            .returning(*table.c)
        ).one_or_none()
        if taken is not None:
            return taken
    return None
