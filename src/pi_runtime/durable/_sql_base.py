"""`SqlBase`: a SQLAlchemy engine and the one way to run a transaction on it.

The backends differ only in how a transaction begins and whether rows are locked
(`backends.py`); each concern's methods are a mixin over this (`_sql.py` joins them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import ClassVar, Self, TypeVar

from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from . import schema as t
from ._engine import Target, reason
from ._stops import Listener, Stops
from ._tx import STOP_CHANNEL, Tx
from ._watch import PgWatch, Watch
from .errors import Conflict, StoreError, StoreUnavailable
from .migrations import applied_migrations, migrate

T = TypeVar("T")
Clock = Callable[[], datetime]

_RETRIES = 5
# Serialization failure and deadlock (PostgreSQL): the whole operation is safe to rerun.
_TRANSIENT_SQLSTATES = {"40001", "40P01"}


def utc_now() -> datetime:
    return datetime.now(UTC)


class SqlBase:
    """The connection, transactions with retries, migrations and change notices."""

    backend: ClassVar[str]
    row_locks: ClassVar[bool]

    def __init__(self, engine: Engine, target: Target, *, clock: Clock | None = None) -> None:
        self._engine = engine
        self._target = target
        self._clock = clock or utc_now
        self.url = target.shown
        self._stops: Stops | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._stops is not None:
            self._stops.close()
        self._engine.dispose()

    def _connect(self, *, read: bool) -> Connection:
        """A pooled connection for one operation (`read`: one that writes nothing)."""
        return self._engine.connect()

    def _begin(self, conn: Connection, *, read: bool) -> None:
        """What the backend does as a transaction opens (nothing: SQLAlchemy began it)."""

    def _transient(self, exc: DBAPIError) -> bool:
        return getattr(exc.orig, "sqlstate", None) in _TRANSIENT_SQLSTATES

    def _do(self, op: Callable[[Tx], T], *, read: bool = False) -> T:
        """Run `op` in one transaction, rerunning it whole on a transient conflict, or
        when the server dropped the connection before anything could have committed."""
        for attempt in range(_RETRIES):
            committing = False
            try:
                with self._connect(read=read) as conn, conn.begin() as tx:
                    self._begin(conn, read=read)
                    state = Tx(conn, self._clock(), self.row_locks)
                    done = op(state)
                    committing = True
                    tx.commit()
                if state.stopped and self._stops is not None:
                    self._stops.heard(state.stopped)  # this process's holders, at once
                return done
            except IntegrityError as exc:
                raise Conflict(
                    f"the write conflicts with stored data: {reason(exc, self._target)}"
                ) from exc
            except DBAPIError as exc:
                last = attempt + 1 == _RETRIES
                # A dropped connection (a server restart) fails the first statement on
                # it: rerun on a fresh one. Never when the commit itself failed (it may
                # have happened).
                if exc.connection_invalidated and not committing and not last:
                    continue
                if isinstance(exc, OperationalError) and self._transient(exc) and not last:
                    time.sleep(0.01 * 2**attempt)
                    continue
                kind = StoreUnavailable if isinstance(exc, OperationalError) else StoreError
                raise kind(f"database {self.url}: {reason(exc, self._target)}") from exc
        raise AssertionError("unreachable")

    def ping(self) -> None:
        """Reach the database once (raises StoreUnavailable if it cannot)."""
        self._do(lambda tx: tx.conn.execute(text("SELECT 1")), read=True)

    def migrate(self) -> list[str]:
        """Apply missing migrations; return the names applied now."""
        return self._do(lambda tx: migrate(tx.conn, tx.now))

    def migrations(self) -> list[str]:
        return self._do(lambda tx: applied_migrations(tx.conn), read=True)

    def watch(self) -> Watch | None:
        return PgWatch(self._engine, self._target) if self.row_locks else None

    def stops(self) -> Stops:
        """This store's `Stops`, made on first use (one per store and process)."""
        if self._stops is None:
            listen = self._listen_for_stops if self.row_locks else None
            self._stops = Stops(self._cancelled_among, listen)
        return self._stops

    def _listen_for_stops(self) -> Listener:
        return PgWatch(self._engine, self._target, STOP_CHANNEL)

    def _cancelled_among(self, keys: Sequence[str]) -> list[str]:
        """Which of `keys` name a run or a job that was cancelled."""
        runs = [k[4:] for k in keys if k.startswith("run:")]
        jobs = [k[4:] for k in keys if k.startswith("job:")]

        def op(tx: Tx) -> list[str]:
            found: list[str] = []
            if runs:
                stmt = select(t.runs.c.id).where(
                    t.runs.c.id.in_(runs),
                    t.runs.c.status == "stopped",
                    t.runs.c.stop_reason == "cancelled",
                )
                found += [f"run:{row.id}" for row in tx.conn.execute(stmt)]
            if jobs:
                stmt = select(t.jobs.c.id).where(
                    t.jobs.c.id.in_(jobs), t.jobs.c.status == "cancelled"
                )
                found += [f"job:{row.id}" for row in tx.conn.execute(stmt)]
            return found

        return self._do(op, read=True)
