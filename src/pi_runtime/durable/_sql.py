"""`SqlStore`: the `Store` over SQLAlchemy Core, each method one transaction.

It joins one mixin per concern (`_sql_state.py`, `_sql_work.py`, `_sql_approvals.py`,
`_sql_data.py`, `_sql_memory.py`) over `SqlBase`, which runs the transactions; the
operations themselves are the functions of the `_*.py` modules.
"""

from __future__ import annotations

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
        if (
            look_first
            and not self.row_locks
            and not self._do(_claims.anything_claimable, read=True)
        ):
            return None  # SQLite: an idle look reads, and leaves the write lock to others
        return self._do(lambda tx: _claims.claim_work(tx, owner, lease_s, max_attempts))
