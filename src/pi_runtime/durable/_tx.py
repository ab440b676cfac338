"""What every store operation runs inside: one transaction, its clock, its locking style.

Lock order, so PostgreSQL never deadlocks: an operation that touches a session's rows
(session, messages, runs, waits) locks the session row first; job and outbox paths never
wait for a session lock (claims take it with SKIP LOCKED or not at all). SQLite needs no
row locks: every write transaction begins IMMEDIATE, one writer at a time.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, select, text

from ..data.fields import check_json as check_json
from ..data.fields import check_name
from ..exceptions import UserError
from . import schema as t
from .errors import NotFound

S = TypeVar("S", bound=Select[Any])

WORK_CHANNEL = "pi_work"  # PostgreSQL NOTIFY channel: work may be claimable


@dataclass(frozen=True, slots=True)
class Tx:
    """One open transaction of an operation.

    Attributes:
        now: the operation's single timestamp (the store's clock, read once).
        row_locks: the backend takes row locks (`FOR UPDATE`); False on SQLite, where
            the transaction itself is exclusive.
    """

    conn: Connection
    now: datetime
    row_locks: bool

    # FOR NO KEY UPDATE: keys never change, so inserts whose foreign keys point at a
    # locked row (a job enqueued into a locked session) need not wait for it.

    def lock(self, stmt: S) -> S:
        """`stmt` taking row locks, waiting for them."""
        return stmt.with_for_update(key_share=True) if self.row_locks else stmt

    def skip_locked(self, stmt: S) -> S:
        """`stmt` taking row locks, skipping rows someone else holds."""
        return stmt.with_for_update(key_share=True, skip_locked=True) if self.row_locks else stmt

    def until(self, seconds: float) -> datetime:
        return self.now + timedelta(seconds=seconds)

    def lock_session(self, session_id: str) -> Row[Any]:
        """The session's row, locked for the rest of the transaction (NotFound if none)."""
        row = self.conn.execute(
            self.lock(select(t.sessions).where(t.sessions.c.id == session_id))
        ).one_or_none()
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return row

    def try_lock_session(self, session_id: str) -> Row[Any] | None:
        """The session's row if it can be locked without waiting, else None."""
        return self.conn.execute(
            self.skip_locked(select(t.sessions).where(t.sessions.c.id == session_id))
        ).one_or_none()

    def notify(self) -> None:
        """Tell listening workers, at commit, that work may be claimable (PostgreSQL;
        SQLite workers poll)."""
        if self.row_locks:
            self.conn.execute(text(f"NOTIFY {WORK_CHANNEL}"))

    def set_session_status(self, session_id: str, status: str) -> None:
        """Change a session's status (the caller holds its lock); bumps its version."""
        self.conn.execute(
            t.sessions.update()
            .where(t.sessions.c.id == session_id)
            .values(status=status, version=t.sessions.c.version + 1, updated_at=self.now)
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
    """The JSON serializer of both engines (same text on SQLite and PostgreSQL)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
