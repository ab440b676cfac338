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
    """`LISTEN pi_work` (or `channel`) on a connection of its own (reopened after a
    failure)."""

    def __init__(self, engine: Engine, target: Target, channel: str = WORK_CHANNEL) -> None:
        self._engine = engine
        self._target = target
        self._channel = channel
        self._conn: Any = None

    def _connect(self) -> Any:
        import psycopg

        args, kwargs = self._engine.dialect.create_connect_args(self._engine.url)
        conn = psycopg.connect(*args, **kwargs, autocommit=True)
        conn.execute(f"LISTEN {self._channel}")
        return conn

    def wait(self, timeout_s: float) -> bool:
        return bool(self.notices(timeout_s))

    def notices(self, timeout_s: float) -> list[str]:
        """The payloads of the notices that arrive first within `timeout_s` (at least
        one, or none when the time is up)."""
        import psycopg

        try:
            if self._conn is None:
                self._conn = self._connect()
            heard = [n.payload for n in self._conn.notifies(timeout=timeout_s, stop_after=1)]
            if heard:  # the ones that came with it, without waiting again
                heard += [n.payload for n in self._conn.notifies(timeout=0)]
            return heard
        except psycopg.Error as exc:
            self.close()
            raise StoreUnavailable(
                f"database {self._target.shown}: listening on {self._channel}: "
                f"{reason(exc, self._target)}"
            ) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
