"""Claiming a row under a lease: the one loop that job, run and outbox claims share.

A claim looks at the oldest claimable row nobody else has locked, lets the caller vet it
(settle an expired attempt, or pass over a busy session), then moves it under the new
lease with a conditional update, so of claimers racing for a row exactly one gets it.
Each kind of claim builds its statements once (`Claim`); a claim binds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    or_,
    select,
)

from ._stmts import NOW, key, locked
from ._tx import Tx, check_id, check_lease

MAX_SWEEP = 32  # candidates a claim may settle or pass over before giving up for now

_OWNER: BindParameter[str] = bindparam("owner")
_UNTIL: BindParameter[Any] = bindparam("until", type_=NOW.type)
_PASSED: BindParameter[Any] = bindparam("passed", expanding=True)


def queued_or_expired(table: Table) -> ColumnElement[bool]:
    """`table`'s rows a claim may take: queued, or running under a lease that ran out
    (compared with `NOW`)."""
    return or_(
        table.c.status == "queued",
        and_(table.c.status == "running", table.c.lease_expires_at < NOW),
    )


@dataclass(frozen=True, slots=True)
class Claim:
    """The statements of one kind of claim, bound per call with `now`, `owner`, `until`
    (the new lease's end) and `passed` (candidates already looked at).

    Attributes:
        pick: the oldest claimable row, by whether rows are locked (skipping locked ones).
        pick_past: the same, leaving out the `passed` ids.
        take: the conditional update moving a row under the new lease, returning it.
    """

    pick: Mapping[bool, Select[Any]]
    pick_past: Mapping[bool, Select[Any]]
    take: Update


def claim_of(
    table: Table,
    claimable: ColumnElement[bool],
    *,
    oldest: ColumnElement[Any],
    still: ColumnElement[bool] | None = None,
    values: Mapping[str, Any] | None = None,
) -> Claim:
    """Build a claim on `table`'s `oldest`-first `claimable` rows (compared with `NOW`).

    Args:
        still: what the row must still satisfy when taken (default: `claimable`).
        values: more columns the take sets (e.g. `started_at`), as constants or
            expressions over `NOW`.
    """
    # One row at a time: locking a batch would hide the rest from other claimers.
    pick = select(table).where(claimable).order_by(oldest).limit(1)
    past = select(table).where(claimable, table.c.id.not_in(_PASSED)).order_by(oldest).limit(1)
    take = (
        table.update()
        .where(table.c.id == bindparam(key("id")), claimable if still is None else still)
        .values(
            lease_owner=_OWNER,
            lease_expires_at=_UNTIL,
            attempts=table.c.attempts + 1,
            **(values or {}),
        )
        .returning(*table.c)
    )
    return Claim(
        pick={False: pick, True: locked(pick, "skip")},
        pick_past={False: past, True: locked(past, "skip")},
        take=take,
    )


def claim_under_lease(
    tx: Tx,
    claim: Claim,
    *,
    owner: str,
    lease_s: float,
    vet: Callable[[Row[Any]], bool] = lambda row: True,
) -> Row[Any] | None:
    """The oldest row `claim` may take, now held by `owner` for `lease_s` with one more
    attempt; None when there is none. `vet` returning False passes over a candidate (the
    callback may have settled it)."""
    check_id("owner", owner)
    check_lease(lease_s)
    passed: list[Any] = []
    for _ in range(MAX_SWEEP):
        if passed:
            found = tx.conn.execute(
                claim.pick_past[tx.row_locks], {"now": tx.now, "passed": passed}
            )
        else:
            found = tx.conn.execute(claim.pick[tx.row_locks], {"now": tx.now})
        row = found.one_or_none()
        if row is None:
            return None
        passed.append(row.id)
        if not vet(row):
            continue
        # Conditional: only one claimer can move the row (the others get no row back).
        params = {key("id"): row.id, "now": tx.now, "owner": owner, "until": tx.until(lease_s)}
        taken = tx.conn.execute(claim.take, params).one_or_none()
        if taken is not None:
            return taken
    return None
