"""Statements built once and bound per call.

Building a SQLAlchemy statement costs about three times what running a built one does
(about 70 µs against 25 µs for a row by key here), and a job's way through the store runs
some forty of them. So the common shapes are built on first use and kept: rows by key and
updates by key, each keyed by table and column names. Values always travel as bound
parameters, never inside the statement.

Parameter names: a key column `c` binds as `k_c`; an update's new values bind under
their column names (SQLAlchemy builds the SET clause from them); `now` is the operation's
timestamp wherever a statement compares with it.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    literal_column,
    select,
)

from . import schema as t

S = TypeVar("S", bound=Select[Any])

Lock = Literal["", "wait", "skip"]
"""How a select locks its rows: not at all, waiting for them, or skipping locked ones.
Only backends with row locks take them (`Tx` passes "" on SQLite)."""

NOW: BindParameter[Any] = bindparam("now", type_=t.UtcDateTime())
"""The operation's timestamp, bound at execution (`Tx.now`)."""


def fixed(word: str) -> ColumnElement[str]:
    """`word` (a status, a kind) written into a statement instead of bound to it.

    For the values a query plan depends on. psycopg prepares a statement after its fifth
    run, and PostgreSQL then soon plans it once for any parameters: bound, `status = $1`
    reads as "some status", as common as any, and with 100,000 finished sessions the look
    before each claim read every run (24 ms of server time a job, against 1.3 ms for all
    the job's other statements). Written in, the planner sees `status = 'queued'`, rare
    by the table's statistics, and reads the index.
    """
    if not word.replace("_", "").isalpha() or not word.islower():
        raise ValueError(f"not a lowercase word: {word!r}")
    return literal_column(f"'{word}'", Text)


def key(column: str) -> str:
    """The parameter name a key column binds under."""
    return f"k_{column}"


def locked(stmt: S, lock: Lock) -> S:
    """`stmt` taking row locks (FOR NO KEY UPDATE, see `_tx`) as `lock` says."""
    if lock == "":
        return stmt
    return stmt.with_for_update(key_share=True, skip_locked=lock == "skip")


@cache
def rows_by(table: Table, keys: tuple[str, ...], lock: Lock = "") -> Select[Any]:
    """Every column of `table`'s rows whose `keys` equal their parameters."""
    query = select(table).where(*(table.c[name] == bindparam(key(name)) for name in keys))
    return locked(query, lock)


@cache
def update_by(table: Table, keys: tuple[str, ...]) -> Update:
    """An update of `table`'s rows whose `keys` equal their parameters; the columns it
    sets are the other parameters given at execution."""
    return table.update().where(*(table.c[name] == bindparam(key(name)) for name in keys))


def _session_lock_row() -> Select[Any]:
    """What a session's lock reads of its row: what writers under it check and count
    (id, status, version, message count), not the agent, which may be kilobytes of JSON."""
    c = t.sessions.c
    return select(c.id, c.status, c.version, c.message_count)


@cache
def session_lock(lock: Lock = "") -> Select[Any]:
    """The lock row of the session whose id is the `k_id` parameter."""
    query = _session_lock_row().where(t.sessions.c.id == bindparam(key("id")))
    return locked(query, lock)


@cache
def session_of(table: Table, lock: Lock = "") -> Select[Any]:
    """The lock row of the session of `table`'s row whose `id` is the `k_id` parameter:
    its session is found and locked in one statement (only the session row is locked)."""
    owner = select(table.c.session_id).where(table.c.id == bindparam(key("id")))
    return locked(_session_lock_row().where(t.sessions.c.id == owner.scalar_subquery()), lock)
