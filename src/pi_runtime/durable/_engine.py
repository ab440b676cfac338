"""Database URLs to SQLAlchemy engines, set up the way the store relies on.

SQLite: WAL (readers never block the writer), a busy timeout, foreign keys on, and every
write transaction `BEGIN IMMEDIATE` — one writer at a time, so a claim that reads then
updates cannot interleave with another. PostgreSQL: psycopg 3, READ COMMITTED, row locks.
"""

from __future__ import annotations

import random
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import ConnectionPoolEntry

from ..exceptions import UserError
from ._tx import dumps

Backend: TypeAlias = Literal["sqlite", "postgresql"]

_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}
_USAGE = "use sqlite:///PATH (a file) or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed database URL: which backend, the URL to connect with, and how to show it."""

    backend: Backend
    url: URL
    shown: str  # the URL as given, password masked: safe in messages and logs


def redact(raw: str) -> str:
    """`raw` with any password replaced by `***`."""
    return _PASSWORD.sub(r"\1***@", raw)


def parse_url(raw: str) -> Target:
    """Check a database URL; UserError says what is wrong and what would work."""
    shown = redact(raw.strip()) if isinstance(raw, str) else repr(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise UserError(f"no database URL given: {_USAGE}")
    try:
        url = make_url(raw.strip())
    except ArgumentError as exc:
        raise UserError(f"not a database URL: {shown!r}; {_USAGE}") from exc
    shown = url.render_as_string(hide_password=True)
    if url.drivername in _SQLITE_DRIVERS:
        if url.database in (None, "", ":memory:") or url.database.startswith("file:"):
            raise UserError(
                f"{shown!r} is not a database file: the store needs a file that every "
                f"connection and worker shares; {_USAGE}"
            )
        return Target("sqlite", url.set(drivername="sqlite+pysqlite"), shown)
    if url.drivername in _POSTGRES_DRIVERS:
        if not url.database:
            raise UserError(f"{shown!r} names no database; {_USAGE}")
        return Target("postgresql", url.set(drivername="postgresql+psycopg"), shown)
    raise UserError(f"unsupported database URL {shown!r}; {_USAGE}")


def _enter_wal(cursor: Any, wait_s: float) -> None:
    """Switch to WAL, waiting out the race of connections opening a new file at once.

    The switch needs the file to itself, and SQLite answers "database is locked" at once
    rather than calling the busy handler when that could deadlock — so several processes
    opening a fresh database together would fail without this retry.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005 + random.random() * 0.02)


def sqlite_engine(target: Target, *, busy_timeout_s: float) -> Engine:
    database = target.url.database
    assert database is not None
    try:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the folder of {target.shown!r}: {exc}") from exc
    engine = create_engine(
        target.url,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        json_serializer=dumps,
    )
    busy_ms = int(busy_timeout_s * 1000)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # The driver must not open transactions on its own: `sqlite_begin` does.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        _enter_wal(cursor, busy_timeout_s)
        cursor.execute("PRAGMA foreign_keys=ON")
        # NORMAL is crash-safe in WAL: an OS crash or power loss can only roll back the
        # last commits, whole — a job or delivery then simply runs again under its lease,
        # and nothing half-written is ever seen. FULL would fsync every commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def sqlite_begin(conn: Connection, *, reading: bool) -> None:
    """Begin the transaction SQLAlchemy just opened on `conn`: IMMEDIATE, so writers take
    turns from their first statement, or DEFERRED for a read.

    Called by the SQLite store itself, not from a `begin` event listener: any listener on
    a connection makes SQLAlchemy dispatch events around every statement (about 4 % of a
    SQLite worker's CPU). On the driver's connection: a whole SQLAlchemy execution for
    these two words cost about a tenth of a short operation. Its errors (a busy database)
    reach the store as SQLAlchemy's, like every other statement's.
    """
    statement = "BEGIN DEFERRED" if reading else "BEGIN IMMEDIATE"
    try:
        conn.connection.dbapi_connection.execute(statement)  # type: ignore[union-attr]
    except sqlite3.Error as exc:
        raise DBAPIError.instance(statement, None, exc, sqlite3.Error) from exc


def postgres_engine(target: Target, *, pool_size: int, connect_timeout_s: float) -> Engine:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"{target.shown!r} needs the PostgreSQL driver psycopg 3: "
            "pip install 'psycopg[binary]>=3.1'"
        ) from exc
    return create_engine(
        target.url,
        pool_size=pool_size,
        max_overflow=pool_size * 2,
        # No ping per checkout (a round trip per operation): a connection the server
        # dropped fails its first statement, and `SqlStore._do` reruns the operation.
        pool_pre_ping=False,
        connect_args={"connect_timeout": max(1, round(connect_timeout_s))},
        json_serializer=dumps,
    )


def reason(exc: BaseException, target: Target) -> str:
    """The driver's own words for a failure, on one line, without the password."""
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    password = target.url.password
    if password:
        text = text.replace(str(password), "***")
    return text
