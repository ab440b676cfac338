"""Claiming rows under leases: the one loop that job, run and outbox claims share.

A claim looks at the oldest claimable rows nobody else has locked (as many as it has
owners for: a worker with idle slots claims for all of them at once), lets the caller
vet each (settle an expired attempt, or pass over a busy session), then moves each under
its new lease with a conditional update, so of claimers racing for a row exactly one gets
it. Each kind of claim builds its statements once (`Claim`); a claim binds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Row,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    or_,
    select,
)

from ._stmts import NOW, fixed, key, locked
from ._tx import Tx, check_id, check_lease

MAX_SWEEP = 32  # candidates a claim may settle or pass over before giving up for now

_OWNER: BindParameter[str] = bindparam("owner")
_UNTIL: BindParameter[Any] = bindparam("until", type_=NOW.type)
_PASSED: BindParameter[Any] = bindparam("passed", expanding=True)
_LIMIT: BindParameter[int] = bindparam("limit", type_=Integer)


def queued_or_expired(table: Table) -> ColumnElement[bool]:
    """`table`'s rows a claim may take: queued, or running under a lease that ran out
    (compared with `NOW`). The statuses are written in (`fixed`): most rows of a store
    in use are finished, and only a plan that knows which status is asked for reads the
    claim index instead of the table."""
    return or_(
        table.c.status == fixed("queued"),
        and_(table.c.status == fixed("running"), table.c.lease_expires_at < NOW),
    )


@dataclass(frozen=True, slots=True)
class Claim:
    """The statements of one kind of claim, bound per call with `now`, `owner`, `until`
    (the new lease's end), `limit` (how many rows are wanted) and `passed` (candidates
    already looked at).

    Attributes:
        pick: the oldest claimable rows, by whether rows are locked (skipping locked ones).
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
    vetted: Sequence[str] = (),
) -> Claim:
    """Build a claim on `table`'s `oldest`-first `claimable` rows (compared with `NOW`).

    Args:
        still: what the row must still satisfy when taken (default: `claimable`).
        values: more columns the take sets (e.g. `started_at`), as constants or
            expressions over `NOW`.
        vetted: the columns a candidate is vetted by, besides `id` (a candidate is read
            with those only; the row taken comes back whole).
    """
    # Only as many rows as the claimer has owners for: locking more would hide the rest
    # from other claimers. Only the columns the vetting reads: the database driver makes
    # an object per column of every result, found rows or none.
    columns = [table.c.id, *(table.c[name] for name in vetted)]
    pick = select(*columns).where(claimable).order_by(oldest).limit(_LIMIT)
    past = select(*columns).where(claimable, table.c.id.not_in(_PASSED)).order_by(oldest)
    past = past.limit(_LIMIT)
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
    owners: Sequence[str],
    lease_s: float,
    vet: Callable[[Row[Any]], bool] = lambda row: True,
) -> list[Row[Any]]:
    """The oldest rows `claim` may take, at most one per owner, oldest first: the k-th
    now held by `owners[k]` for `lease_s` with one more attempt. `vet` returning False
    passes over a candidate (the callback may have settled it)."""
    for owner in owners:
        check_id("owner", owner)
    check_lease(lease_s)
    taken: list[Row[Any]] = []
    passed: list[Any] = []
    until = tx.until(lease_s)
    while len(taken) < len(owners) and len(passed) < MAX_SWEEP + len(owners) - 1:
        want = len(owners) - len(taken)
        if passed:
            params = {"now": tx.now, "limit": want, "passed": passed}
            found = tx.conn.execute(claim.pick_past[tx.row_locks], params).all()
        else:
            params = {"now": tx.now, "limit": want}
            found = tx.conn.execute(claim.pick[tx.row_locks], params).all()
        for row in found:
            passed.append(row.id)
            if not vet(row):
                continue
            # Conditional: only one claimer can move the row (the others get no row back).
            params = {key("id"): row.id, "now": tx.now, "owner": owners[len(taken)],
                      "until": until}  # fmt: skip
            moved = tx.conn.execute(claim.take, params).one_or_none()
            if moved is not None:
                taken.append(moved)
        if len(found) < want:
            break  # no more candidates
    return taken
