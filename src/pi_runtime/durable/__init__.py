"""Durable state: sessions, runs, async tool jobs, waits, the outbox, and the data plane's
snapshots and references — on SQLite (one file) or PostgreSQL (many workers).

    store = open_store("sqlite:///.pi/pi.db")          # or "postgresql://user@host/db"
    session = store.create_session()
"""

from .backends import PostgresStore, SQLiteStore, open_store
from .errors import Conflict, LeaseLost, NotFound, StoreError, StoreUnavailable
from .migrations import MIGRATIONS, Migration
from .records import (
    JOB_TERMINAL,
    SESSION_READY,
    SESSION_STATUSES,
    CancelResult,
    Delivery,
    EventKind,
    EventOutcome,
    FinishedRun,
    JobRecord,
    JobStatus,
    OutboxEvent,
    PageRecord,
    ReferenceRecord,
    RunKind,
    RunRecord,
    RunRecordStatus,
    SessionRecord,
    SessionStatus,
    SnapshotRecord,
    StoredMessage,
    WaitRecord,
    WaitStatus,
)
from .store import DEFAULT_LEASE_S, Store

__all__ = [
    "DEFAULT_LEASE_S",
    "JOB_TERMINAL",
    "MIGRATIONS",
    "SESSION_READY",
    "SESSION_STATUSES",
    "CancelResult",
    "Conflict",
    "Delivery",
    "EventKind",
    "EventOutcome",
    "FinishedRun",
    "JobRecord",
    "JobStatus",
    "LeaseLost",
    "Migration",
    "NotFound",
    "OutboxEvent",
    "PageRecord",
    "PostgresStore",
    "ReferenceRecord",
    "RunKind",
    "RunRecord",
    "RunRecordStatus",
    "SQLiteStore",
    "SessionRecord",
    "SessionStatus",
    "SnapshotRecord",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredMessage",
    "WaitRecord",
    "WaitStatus",
    "open_store",
]
