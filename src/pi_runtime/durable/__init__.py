"""Durable state: sessions, runs, async tool jobs, waits, the outbox, and the data plane's
snapshots and references — on SQLite (one file) or PostgreSQL (many workers).

    store = open_store("sqlite:///.pi/pi.db")          # or "postgresql://user@host/db"
    session = store.create_session()

Sessions run turns (`run_turn`); a background tool's call becomes a job that a `Worker`
runs (checkpointing through `checkpoint()`), delivers under the original tool_call_id and
continues with a `server_result` run — each step one transaction, exactly once.
"""

from .approvals import StoredSession, decide
from .backends import PostgresStore, SQLiteStore, open_store
from .errors import Conflict, LeaseLost, NotFound, StoreError, StoreUnavailable
from .migrations import MIGRATIONS, Migration
from .progress import Checkpoint, checkpoint
from .recipe import Recipe
from .records import (
    JOB_TERMINAL,
    SESSION_READY,
    SESSION_STATUSES,
    ApprovalRecord,
    ApprovalStatus,
    CancelResult,
    Decided,
    Delivery,
    EventKind,
    EventOutcome,
    FinishedJob,
    FinishedRun,
    JobEnding,
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
from .sessions import SessionTurn, open_session, run_held, run_turn
from .store import (
    DEFAULT_LEASE_S,
    Approvals,
    JobQueue,
    Outbox,
    RunStore,
    SessionStore,
    Store,
    TurnStore,
)
from .views import session_view
from .worker import Worker, WorkerStats

__all__ = [
    "DEFAULT_LEASE_S",
    "JOB_TERMINAL",
    "MIGRATIONS",
    "SESSION_READY",
    "SESSION_STATUSES",
    "ApprovalRecord",
    "ApprovalStatus",
    "Approvals",
    "CancelResult",
    "Checkpoint",
    "Conflict",
    "Decided",
    "Delivery",
    "EventKind",
    "EventOutcome",
    "FinishedJob",
    "FinishedRun",
    "JobEnding",
    "JobQueue",
    "JobRecord",
    "JobStatus",
    "LeaseLost",
    "Migration",
    "NotFound",
    "Outbox",
    "OutboxEvent",
    "PageRecord",
    "PostgresStore",
    "Recipe",
    "ReferenceRecord",
    "RunKind",
    "RunRecord",
    "RunRecordStatus",
    "RunStore",
    "SQLiteStore",
    "SessionRecord",
    "SessionStatus",
    "SessionStore",
    "SessionTurn",
    "SnapshotRecord",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredMessage",
    "StoredSession",
    "TurnStore",
    "WaitRecord",
    "WaitStatus",
    "Worker",
    "WorkerStats",
    "checkpoint",
    "decide",
    "open_session",
    "open_store",
    "run_held",
    "run_turn",
    "session_view",
]
