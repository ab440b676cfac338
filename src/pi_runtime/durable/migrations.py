"""Named schema migrations, applied once each, in order, and recorded with their time.

Rules: a migration is never edited or renamed once released; a schema change is a new
`Migration` appended to `MIGRATIONS` (and the tables in `schema.py` updated to match).
The first migration creates the tables from `_schema_0001.py`, a frozen copy of their
released definitions, so it stays what it was; later ones may use `schema.py` until a
newer migration changes what they made (then copy theirs too).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select, text

from ..exceptions import UserError
from . import _schema_0001
from . import schema as t

# One key for every Pi migrator on a PostgreSQL server: they take turns.
ADVISORY_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"pi_runtime.durable.migrations").digest()[:8], "big", signed=True
)


@dataclass(frozen=True, slots=True)
class Migration:
    """A named change of the schema; `apply` runs inside the migrating transaction."""

    name: str
    apply: Callable[[Connection], None]


def _initial(conn: Connection) -> None:
    _schema_0001.metadata.create_all(conn, checkfirst=False)


def _approvals(conn: Connection) -> None:
    t.approvals.create(conn, checkfirst=False)


def _memory_facts(conn: Connection) -> None:
    t.memory_facts.create(conn, checkfirst=False)


def _sessions_created(conn: Connection) -> None:
    (index,) = (i for i in t.sessions.indexes if i.name == "ix_sessions_created")
    index.create(conn)


def _sessions_namespace(conn: Connection) -> None:
    (index,) = (i for i in t.sessions.indexes if i.name == "ix_sessions_namespace")
    index.create(conn)


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", _initial),
    Migration("0002_approvals", _approvals),
    Migration("0003_memory_facts", _memory_facts),
    Migration("0004_sessions_created", _sessions_created),
    Migration("0005_sessions_namespace", _sessions_namespace),
)


def applied_migrations(conn: Connection) -> list[str]:
    """Names of the migrations recorded in the database, oldest first."""
    rows = conn.execute(
        select(t.schema_migrations.c.name).order_by(
            t.schema_migrations.c.applied_at, t.schema_migrations.c.name
        )
    )
    return [row.name for row in rows]


def migrate(
    conn: Connection, now: datetime, migrations: Sequence[Migration] = MIGRATIONS
) -> list[str]:
    """Apply the migrations the database lacks, in order; return the names applied.

    Runs in the caller's transaction, so a failing migration leaves nothing behind (DDL is
    transactional on both backends). On PostgreSQL it first takes a transaction-scoped
    advisory lock, so concurrent migrators apply each migration exactly once; on SQLite
    the write transaction is already exclusive.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
    t.schema_migrations.create(conn, checkfirst=True)
    applied = set(applied_migrations(conn))
    unknown = sorted(applied - {m.name for m in migrations})
    if unknown:
        raise UserError(
            "the database was migrated by a newer Pi (unknown migrations: "
            f"{', '.join(unknown)}); upgrade pi-runtime to use it"
        )
    done = []
    for migration in migrations:
        if migration.name in applied:
            continue
        migration.apply(conn)
        conn.execute(t.schema_migrations.insert().values(name=migration.name, applied_at=now))
        done.append(migration.name)
    return done
