"""Being told that work may be claimable, instead of polling for it (PostgreSQL).

Every transaction that makes work claimable (a job enqueued or ended, a wait registered
for a finished job, a run queued, a lease released) sends `NOTIFY pi_work`, delivered at
its commit. A worker keeps one extra connection `LISTEN`ing and looks for work when
told, polling only as a fallback (expired leases send nothing). SQLite has no such
channel: its workers poll, with reads only (`_claims.anything_claimable`).
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import Engine

from ._engine import Target, reason
from ._tx import WORK_CHANNEL
from .errors import StoreUnavailable


class Watch(Protocol):
    """A subscription to "work may be claimable" notices."""

    def wait(self, timeout_s: float) -> bool:
        """Block until a notice arrives (True) or `timeout_s` passes (False)."""
        ...

    def close(self) -> None: ...


class PgWatch:
    """`LISTEN pi_work` on a connection of its own (reopened after a failure)."""

    def __init__(self, engine: Engine, target: Target) -> None:
        self._engine = engine
        self._target = target
        self._conn: Any = None

    def _connect(self) -> Any:
        import psycopg

        args, kwargs = self._engine.dialect.create_connect_args(self._engine.url)
        conn = psycopg.connect(*args, **kwargs, autocommit=True)
        conn.execute(f"LISTEN {WORK_CHANNEL}")
        return conn

    def wait(self, timeout_s: float) -> bool:
        import psycopg

        try:
            if self._conn is None:
                self._conn = self._connect()
            for _ in self._conn.notifies(timeout=timeout_s, stop_after=1):
                return True
            return False
        except psycopg.Error as exc:
            self.close()
            raise StoreUnavailable(
                f"database {self._target.shown}: listening for work: {reason(exc, self._target)}"
            ) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
