"""The tables, as the code reads and writes them today.

Names here are a public format (operators query them, other versions migrate them): a
change is a new migration in `migrations.py`, never an edit of what shipped. Statuses are
plain text checked by the code, so adding one needs no table rebuild on SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    literal_column,
    text,
)
from sqlalchemy.sql.elements import ColumnElement


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both backends (SQLite has no time zones: stored naive UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json() -> JSON:
    # Plain JSON, not JSONB: payloads round-trip byte for byte (key order kept).
    return JSON(none_as_null=True)


def _ts(name: str, *, nullable: bool = False) -> Column[Any]:
    return Column(name, UtcDateTime(), nullable=nullable)


def _lease() -> list[Column[Any]]:
    return [
        Column("lease_owner", Text, nullable=True),
        _ts("lease_expires_at", nullable=True),
        Column("attempts", Integer, nullable=False, default=0),
    ]


# Integer on SQLite so the key is the rowid (autoincrementing); BIGINT elsewhere.
_BIG_ID = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("name", Text, primary_key=True),
    _ts("applied_at"),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("status", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("message_count", Integer, nullable=False),
    Column("agent", _json(), nullable=True),
    _ts("created_at"),
    _ts("updated_at"),
    # `list_sessions` pages newest first: without it every page sorts the whole table
    Index("ix_sessions_created", "created_at", "id"),
)


def namespace_of(session_id: ColumnElement[str]) -> ColumnElement[str]:
    """The namespace a session id is in: the id up to its last `/`, that included (`""`
    for an id without one). `rtrim(id, id without its slashes)` strips from the right
    every character but `/`: one expression that both backends index, written with
    literals (an index serves only the very expression it was made on)."""
    slash: ColumnElement[str] = literal_column("'/'", Text)
    nothing: ColumnElement[str] = literal_column("''", Text)
    return func.rtrim(session_id, func.replace(session_id, slash, nothing))


# A page of a namespace's sessions (a tenant's, or those of no tenant), newest first,
# reads just that page, however many sessions the other namespaces hold.
Index("ix_sessions_namespace", namespace_of(sessions.c.id), sessions.c.created_at, sessions.c.id)

runs = Table(
    "runs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("session_id", Text, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("stop_reason", Text, nullable=True),
    Column("parent_run_id", Text, ForeignKey("runs.id"), nullable=True),
    Column("input", _json(), nullable=True),
    Column("result", _json(), nullable=True),
    *_lease(),
    _ts("created_at"),
    _ts("started_at", nullable=True),
    _ts("finished_at", nullable=True),
    # A run that ended awaiting gets at most one continuation, whoever delivers last.
    UniqueConstraint("parent_run_id", name="uq_runs_continuation"),
    Index("ix_runs_session", "session_id", "created_at"),
    Index("ix_runs_claim", "status", "created_at"),
)

messages = Table(
    "messages",
    metadata,
    Column("session_id", Text, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", Text, nullable=False),
    # Set on tool results only: NULLs never collide, so the unique key below means
    # "one tool call, one result".
    Column("tool_call_id", Text, nullable=True),
    Column("run_id", Text, ForeignKey("runs.id"), nullable=True),
    Column("payload", _json(), nullable=False),
    _ts("created_at"),
    PrimaryKeyConstraint("session_id", "seq", name="pk_messages"),
    UniqueConstraint("session_id", "tool_call_id", name="uq_messages_tool_result"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("session_id", Text, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=True),
    Column("tool_call_id", Text, nullable=True),
    Column("tool", Text, nullable=False),
    Column("arguments", _json(), nullable=False),
    Column("status", Text, nullable=False),
    Column("retry_safe", Boolean, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    *_lease(),
    Column("checkpoint", _json(), nullable=True),
    Column("result", _json(), nullable=True),
    Column("error", _json(), nullable=True),
    _ts("created_at"),
    _ts("updated_at"),
    _ts("started_at", nullable=True),
    _ts("finished_at", nullable=True),
    # Enqueueing the same tool call twice (a resumed run) yields the same job.
    UniqueConstraint("session_id", "tool_call_id", name="uq_jobs_tool_call"),
    Index("ix_jobs_claim", "status", "created_at"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", _BIG_ID, primary_key=True, autoincrement=True),
    Column("job_id", Text, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", _json(), nullable=False),
    _ts("created_at"),
    _ts("delivered_at", nullable=True),
    Column("outcome", Text, nullable=True),
    *_lease(),
    UniqueConstraint("job_id", "kind", name="uq_outbox_job_kind"),
    Index(
        "ix_outbox_pending",
        "created_at",
        postgresql_where=text("delivered_at IS NULL"),
        sqlite_where=text("delivered_at IS NULL"),
    ),
)

waits = Table(
    "waits",
    metadata,
    Column("session_id", Text, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("job_id", Text, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", Text, ForeignKey("runs.id"), nullable=True),
    Column("status", Text, nullable=False),
    Column("event_id", _BIG_ID, ForeignKey("outbox.id"), nullable=True),
    _ts("created_at"),
    _ts("resolved_at", nullable=True),
    PrimaryKeyConstraint("session_id", "tool_call_id", name="pk_waits"),
    UniqueConstraint("job_id", name="uq_waits_job"),
    Index("ix_waits_run", "run_id"),
)

# A tool call waiting for a person: pending until approved (it then runs as the job
# `job_id`, awaited like a background call) or rejected (answered with `reason`).
approvals = Table(
    "approvals",
    metadata,
    Column("session_id", Text, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("run_id", Text, ForeignKey("runs.id"), nullable=False),
    Column("tool", Text, nullable=False),
    Column("arguments", _json(), nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("decided_arguments", _json(), nullable=True),
    Column("reason", Text, nullable=True),
    Column("job_id", Text, ForeignKey("jobs.id"), nullable=True),
    _ts("created_at"),
    _ts("decided_at", nullable=True),
    PrimaryKeyConstraint("session_id", "tool_call_id", name="pk_approvals"),
    Index("ix_approvals_run", "run_id"),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("locator", _json(), nullable=True),
    Column("version", Text, nullable=True),
    Column("digest", Text, nullable=False),
    Column("page_count", Integer, nullable=False),
    Column("row_count", Integer, nullable=True),
    Column("meta", _json(), nullable=True),
    _ts("created_at"),
    _ts("expires_at", nullable=True),
    Index("ix_snapshots_expires", "expires_at"),
)

pages = Table(
    "pages",
    metadata,
    Column("snapshot_id", Text, ForeignKey("snapshots.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("body", Text, nullable=False),
    Column("row_count", Integer, nullable=True),
    PrimaryKeyConstraint("snapshot_id", "seq", name="pk_pages"),
)

resource_refs = Table(
    "resource_refs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("snapshot_id", Text, ForeignKey("snapshots.id", ondelete="CASCADE"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("meta", _json(), nullable=True),
    _ts("created_at"),
    _ts("expires_at", nullable=True),
    Index("ix_resource_refs_expires", "expires_at"),
)

# Secrets every worker must share (e.g. the HMAC key that signs page cursors).
signing_keys = Table(
    "signing_keys",
    metadata,
    Column("name", Text, primary_key=True),
    Column("secret", Text, nullable=False),
    _ts("created_at"),
)

# Long-term facts (memory L3), per scope (a user, a tenant); kept apart from sessions,
# which they outlive. `key` is the fact's identity in its scope (`memory.fact_key`).
memory_facts = Table(
    "memory_facts",
    metadata,
    Column("id", Text, primary_key=True),
    Column("scope", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("run_id", Text, nullable=True),
    Column("embedder", Text, nullable=True),
    Column("embedding", _json(), nullable=True),
    _ts("created_at"),
    UniqueConstraint("scope", "key", name="uq_memory_facts_key"),
    Index("ix_memory_facts_scope", "scope", "created_at"),
)
