"""`SqlStore`: the `Store` over SQLAlchemy Core, each method one transaction.

It joins one mixin per concern (`_sql_state.py`, `_sql_work.py`, `_sql_approvals.py`,
`_sql_data.py`, `_sql_memory.py`) over `SqlBase`, which runs the transactions; the
operations themselves are the functions of the `_*.py` modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..exceptions import UserError
from . import _claims
from ._sql_approvals import ApprovalsSql
from ._sql_base import Clock, SqlBase, utc_now
from ._sql_data import DataSql
from ._sql_memory import MemorySql
from ._sql_state import RunsSql, SessionsSql
from ._sql_work import JobsSql, OutboxSql
from .records import JobRecord, OutboxEvent, RunRecord
from .store import DEFAULT_LEASE_S

__all__ = ["Clock", "SqlStore", "utc_now"]


class SqlStore(SessionsSql, RunsSql, JobsSql, OutboxSql, ApprovalsSql, DataSql, MemorySql, SqlBase):
    """The operations shared by both backends."""

    def claim_work(
        self,
        owner: str,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        max_attempts: int = 3,
        look_first: bool = True,
    ) -> OutboxEvent | RunRecord | JobRecord | None:
        claimed = self.claim_batch(
            [owner], lease_s=lease_s, max_attempts=max_attempts, look_first=look_first
        )
        return next(iter(claimed), None)

    def claim_batch(
        self,
        owners: Sequence[str],
        *,
        lease_s: float = DEFAULT_LEASE_S,
        max_attempts: int = 3,
        look_first: bool = True,
    ) -> list[OutboxEvent | RunRecord | JobRecord]:
        if isinstance(owners, str) or len(set(owners)) != len(owners):
            raise UserError("claim_batch takes a list of distinct owners")
        if not owners:
            return []
        if (
            look_first
            and not self.row_locks
            and not self._do(_claims.anything_claimable, read=True)
        ):
            return []  # SQLite: an idle look reads, and leaves the write lock to others
        return self._do(lambda tx: _claims.claim_work(tx, list(owners), lease_s, max_attempts))
