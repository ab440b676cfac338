"""What every store operation runs inside: one transaction, its clock, its locking style.

Lock order, so PostgreSQL never deadlocks: an operation that touches a session's rows
(session, messages, runs, waits) locks the session row first; job and outbox paths never
wait for a session lock (claims take it with SKIP LOCKED or not at all). SQLite needs no
row locks: every write transaction begins IMMEDIATE, one writer at a time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, Table, bindparam, text

from ..data.fields import check_json as check_json
from ..data.fields import check_name
from ..exceptions import UserError
from ..messages import repair_text
from . import schema as t
from ._stmts import Lock, key, locked, rows_by, session_lock, session_of, update_by
from .errors import NotFound

S = TypeVar("S", bound=Select[Any])

WORK_CHANNEL = "pi_work"  # PostgreSQL NOTIFY channel: work may be claimable
STOP_CHANNEL = "pi_stop"  # ... and: a held run or job was cancelled (payload: its key)

_NOTIFY = text(f"NOTIFY {WORK_CHANNEL}")
_NOTIFY_STOP = text(f"SELECT pg_notify('{STOP_CHANNEL}', :key)")
_SET_STATUS = (
    t.sessions.update()
    .where(t.sessions.c.id == bindparam(key("id")))
    .values(version=t.sessions.c.version + 1)
)


@dataclass(frozen=True, slots=True)
class Tx:
    """One open transaction of an operation.

    Attributes:
        now: the operation's single timestamp (the store's clock, read once).
        row_locks: the backend takes row locks (`FOR UPDATE`); False on SQLite, where
            the transaction itself is exclusive.
        stopped: the keys (`_stops.run_key`, `job_key`) of held work this transaction
            cancelled, told to their holders once it commits.
        no_decisions: runs this transaction found to have left no call for a person to
            decide (`_runs.queue_continuation`): what continues them reads none. A run's
            decisions are registered as it ends, never after.
    """

    conn: Connection
    now: datetime
    row_locks: bool
    stopped: list[str] = field(default_factory=list)
    no_decisions: set[str] = field(default_factory=set)

    # FOR NO KEY UPDATE: keys never change, so inserts whose foreign keys point at a
    # locked row (a job enqueued into a locked session) need not wait for it.

    def lock(self, stmt: S) -> S:
        """`stmt` taking row locks, waiting for them."""
        return locked(stmt, "wait") if self.row_locks else stmt

    def skip_locked(self, stmt: S) -> S:
        """`stmt` taking row locks, skipping rows someone else holds."""
        return locked(stmt, "skip") if self.row_locks else stmt

    def until(self, seconds: float) -> datetime:
        return self.now + timedelta(seconds=seconds)

    def find(self, table: Table, lock: Lock = "", **keys: Any) -> Row[Any] | None:
        """The row of `table` whose columns equal `keys`, or None (`lock`: see `Lock`)."""
        stmt = rows_by(table, tuple(keys), lock if self.row_locks else "")
        return self.conn.execute(stmt, {key(k): v for k, v in keys.items()}).one_or_none()

    def change(self, table: Table, where: Mapping[str, Any], **values: Any) -> None:
        """Set `values` on the rows of `table` whose columns equal `where`."""
        params = {key(k): v for k, v in where.items()}
        self.conn.execute(update_by(table, tuple(where)), {**params, **values})

    def lock_session(self, session_id: str) -> Row[Any]:
        """The session's id, status, version and message count, locked for the rest of
        the transaction (NotFound if there is no such session)."""
        row = self._session(session_id, "wait")
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return row

    def lock_session_of(self, table: Table, row_id: str) -> Row[Any] | None:
        """The session of `table`'s row `row_id`, locked and read as by `lock_session`; None
        when there is no such row, or it belongs to no session. Keys never change, so the
        row need not be read first: read after this, it is current (its writers lock its
        session first), and nothing is read twice."""
        stmt = session_of(table, "wait" if self.row_locks else "")
        return self.conn.execute(stmt, {key("id"): row_id}).one_or_none()

    def try_lock_session(self, session_id: str) -> Row[Any] | None:
        """The session, read as by `lock_session`, if it can be locked without waiting;
        else None."""
        return self._session(session_id, "skip")

    def _session(self, session_id: str, lock: Lock) -> Row[Any] | None:
        stmt = session_lock(lock if self.row_locks else "")
        return self.conn.execute(stmt, {key("id"): session_id}).one_or_none()

    def notify(self) -> None:
        """Tell listening workers, at commit, that work may be claimable (PostgreSQL;
        SQLite workers poll)."""
        if self.row_locks:
            self.conn.execute(_NOTIFY)

    def stop(self, key: str) -> None:
        """Tell the holder of the work `key` names, at commit, that it was cancelled
        (`_stops`): NOTIFY on PostgreSQL, and this process's holders directly."""
        self.stopped.append(key)
        if self.row_locks:
            self.conn.execute(_NOTIFY_STOP, {"key": key})

    def set_session_status(self, session_id: str, status: str, **also: Any) -> None:
        """Change a session's status (the caller holds its lock); bumps its version.
        `also`: other columns of the session row to set in the same statement."""
        self.conn.execute(
            _SET_STATUS, {key("id"): session_id, "status": status, "updated_at": self.now, **also}
        )


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


check_id = check_name
"""A caller-chosen id: the data plane's rule for names, so one rule holds for every id."""


def check_lease(lease_s: float) -> float:
    if not lease_s > 0:
        raise UserError(f"lease_s must be positive, got {lease_s!r}")
    return float(lease_s)


def dumps(value: Any) -> str:
    """The JSON serializer of both engines (same text on SQLite and PostgreSQL).

    A lone surrogate in any string becomes U+FFFD (and a pair is joined), as wherever
    outside text enters: written raw, the driver's UTF-8 encoding failed the whole write
    (a run's result could not be stored, and its session stayed `running`). Surrogates
    appear raw only inside the JSON's strings, so repairing the text repairs the strings.
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return repair_text(text)
