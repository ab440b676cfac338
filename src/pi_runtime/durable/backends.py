"""The two stores and `open_store`, which picks one from a URL."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import Connection

from ..exceptions import UserError
from ._engine import parse_url, postgres_engine, sqlite_begin, sqlite_engine
from ._sql import Clock, SqlStore
from .errors import Conflict, StoreError
from .store import Store


class SQLiteStore(SqlStore):
    """An embedded store in one file: write transactions take turns (`BEGIN IMMEDIATE`)."""

    backend: ClassVar[str] = "sqlite"
    row_locks: ClassVar[bool] = False

    def _begin(self, conn: Connection, *, read: bool) -> None:
        sqlite_begin(conn, reading=read)


class PostgresStore(SqlStore):
    """A shared store for many workers: row locks, and `FOR UPDATE SKIP LOCKED` claims."""

    backend: ClassVar[str] = "postgresql"
    row_locks: ClassVar[bool] = True

    def _connect(self, *, read: bool) -> Connection:
        """Reads run outside a transaction where the server's transactions are READ
        COMMITTED (PostgreSQL's default): there each statement sees what was committed
        when it starts, in a transaction or not, and a read without one makes two round
        trips fewer (BEGIN and COMMIT). A server set to a stricter level keeps them."""
        conn = self._engine.connect()
        if read and conn.default_isolation_level == "READ COMMITTED":
            conn.execution_options(isolation_level="AUTOCOMMIT")  # reset as it is returned
        return conn


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    migrate: bool = True,
    busy_timeout_s: float = 30.0,
    pool_size: int = 5,
    connect_timeout_s: float = 10.0,
) -> Store:
    """Open the store at `url` (`sqlite:///PATH` or `postgresql://…`), migrated.

    Args:
        clock: where timestamps and lease deadlines come from (default: UTC now).
        migrate: apply missing migrations (concurrent openers are safe).
        busy_timeout_s: SQLite: how long a writer waits for its turn.
        pool_size: PostgreSQL: connections kept per process.
        connect_timeout_s: PostgreSQL: how long to try reaching the server.

    Raises:
        UserError: a bad URL, a missing driver, or a database that cannot be reached or
            opened; the message shows the URL without its password.
    """
    target = parse_url(url)
    store: SqlStore
    if target.backend == "postgresql":
        engine = postgres_engine(target, pool_size=pool_size, connect_timeout_s=connect_timeout_s)
        store = PostgresStore(engine, target, clock=clock)
    else:
        store = SQLiteStore(
            sqlite_engine(target, busy_timeout_s=busy_timeout_s), target, clock=clock
        )
    try:
        if migrate:
            store.migrate()
        else:
            store.ping()
    except (StoreError, UserError) as exc:
        store.close()
        if isinstance(exc, UserError | Conflict):
            raise
        raise UserError(f"cannot open the database at {target.shown}: {exc}") from exc
    return store
