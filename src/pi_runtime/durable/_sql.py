"""`SqlStore`: the `Store` over SQLAlchemy Core, each method one transaction.

The backends differ only in how a transaction begins and whether rows are locked
(`backends.py`); the operations themselves are the functions of the `_*.py` modules.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from ..exceptions import UserError
from ..messages import Message, ToolResultMessage
from . import _claims, _data, _delivery, _jobs, _runs, _sessions, _waits
from ._engine import READ_ONLY, Target, reason
from ._tx import Tx
from ._watch import PgWatch, Watch
from .errors import Conflict, StoreError, StoreUnavailable
from .migrations import applied_migrations, migrate
from .records import (
    CancelResult,
    Delivery,
    FinishedRun,
    JobRecord,
    OutboxEvent,
    PageRecord,
    ReferenceRecord,
    RunRecord,
    SessionRecord,
    SnapshotRecord,
    StoredMessage,
    WaitRecord,
)
from .store import DEFAULT_LEASE_S

T = TypeVar("T")
Clock = Callable[[], datetime]

_RETRIES = 5
# Serialization failure and deadlock (PostgreSQL): the whole operation is safe to rerun.
_TRANSIENT_SQLSTATES = {"40001", "40P01"}


def utc_now() -> datetime:
    return datetime.now(UTC)


class SqlStore:
    """The operations shared by both backends."""

    backend: ClassVar[str]
    row_locks: ClassVar[bool]

    def __init__(self, engine: Engine, target: Target, *, clock: Clock | None = None) -> None:
        self._engine = engine
        self._target = target
        self._clock = clock or utc_now
        self.url = target.shown

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    def _transient(self, exc: DBAPIError) -> bool:
        return getattr(exc.orig, "sqlstate", None) in _TRANSIENT_SQLSTATES

    def _do(self, op: Callable[[Tx], T], *, read: bool = False) -> T:
        """Run `op` in one transaction, rerunning it whole on a transient conflict, or
        when the server dropped the connection before anything could have committed."""
        for attempt in range(_RETRIES):
            committing = False
            try:
                with self._engine.connect() as conn:
                    if read:
                        conn = conn.execution_options(**{READ_ONLY: True})
                    with conn.begin() as tx:
                        done = op(Tx(conn, self._clock(), self.row_locks))
                        committing = True
                        tx.commit()
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

    # Sessions and messages

    def create_session(
        self, session_id: str | None = None, *, agent: dict[str, Any] | None = None
    ) -> SessionRecord:
        return self._do(lambda tx: _sessions.create_session(tx, session_id, agent))

    def get_session(self, session_id: str) -> SessionRecord | None:
        return self._do(lambda tx: _sessions.get_session(tx, session_id), read=True)

    def set_session_status(
        self, session_id: str, status: str, *, expected_version: int
    ) -> SessionRecord:
        return self._do(
            lambda tx: _sessions.set_session_status(tx, session_id, status, expected_version)
        )

    def cancel_session(self, session_id: str) -> CancelResult:
        return self._do(lambda tx: _delivery.cancel_session(tx, session_id))

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expect_seq: int | None = None,
    ) -> list[int]:
        return self._do(
            lambda tx: _sessions.append_messages(
                tx, session_id, messages, run_id=run_id, expect_seq=expect_seq
            )
        )

    def load_messages(
        self, session_id: str, *, after_seq: int | None = None
    ) -> list[StoredMessage]:
        return self._do(lambda tx: _sessions.load_messages(tx, session_id, after_seq), read=True)

    # Runs

    def create_run(
        self,
        session_id: str,
        *,
        input: dict[str, Any] | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> RunRecord:
        return self._do(
            lambda tx: _runs.create_run(tx, session_id, input=input, owner=owner, lease_s=lease_s)
        )

    def claim_run(
        self, owner: str, *, lease_s: float = DEFAULT_LEASE_S, max_attempts: int = 3
    ) -> RunRecord | None:
        return self._do(lambda tx: _runs.claim_run(tx, owner, lease_s, max_attempts))

    def renew_run_lease(
        self, run_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> RunRecord:
        return self._do(lambda tx: _runs.renew_run_lease(tx, run_id, owner, lease_s))

    def release_run(self, run_id: str, owner: str) -> RunRecord:
        return self._do(lambda tx: _runs.release_run(tx, run_id, owner))

    def finish_run(
        self,
        run_id: str,
        *,
        owner: str,
        status: str,
        stop_reason: str | None,
        result: dict[str, Any] | None = None,
        messages: Sequence[Message] = (),
        waits: Sequence[tuple[str, str]] = (),
    ) -> FinishedRun:
        return self._do(
            lambda tx: _runs.finish_run(
                tx,
                run_id,
                owner=owner,
                status=status,
                stop_reason=stop_reason,
                result=result,
                messages=messages,
                waits=waits,
            )
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._do(lambda tx: _runs.get_run(tx, run_id), read=True)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        return self._do(lambda tx: _runs.list_runs(tx, session_id), read=True)

    # Jobs

    def enqueue_job(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        session_id: str | None = None,
        tool_call_id: str | None = None,
        retry_safe: bool = True,
        max_attempts: int = 3,
        run_id: str | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> JobRecord:
        def op(tx: Tx) -> JobRecord:
            if run_id is not None or owner is not None:
                if run_id is None or owner is None or session_id is None:
                    raise UserError("a job fenced by a run needs run_id, owner and session_id")
                run = _runs.renew_run_lease(tx, run_id, owner, lease_s)  # LeaseLost: nothing
                if run.session_id != session_id:
                    raise UserError(f"run {run_id!r} is not of session {session_id!r}")
            return _jobs.enqueue_job(
                tx,
                tool=tool,
                arguments=arguments,
                session_id=session_id,
                tool_call_id=tool_call_id,
                retry_safe=retry_safe,
                max_attempts=max_attempts,
            )

        return self._do(op)

    def get_job(self, job_id: str) -> JobRecord | None:
        return self._do(lambda tx: _jobs.get_job(tx, job_id), read=True)

    def list_jobs(self, session_id: str) -> list[JobRecord]:
        return self._do(lambda tx: _jobs.list_jobs(tx, session_id), read=True)

    def claim_job(self, owner: str, *, lease_s: float = DEFAULT_LEASE_S) -> JobRecord | None:
        return self._do(lambda tx: _jobs.claim_job(tx, owner, lease_s))

    def renew_job_lease(
        self, job_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> JobRecord:
        return self._do(lambda tx: _jobs.renew_lease(tx, job_id, owner, lease_s))

    def release_job(self, job_id: str, owner: str) -> JobRecord:
        return self._do(lambda tx: _jobs.release(tx, job_id, owner))

    def cancel_job(self, job_id: str) -> JobRecord:
        return self._do(lambda tx: _jobs.cancel(tx, job_id, "the job was cancelled"))

    def checkpoint_job(
        self, job_id: str, owner: str, checkpoint: Any, *, lease_s: float = DEFAULT_LEASE_S
    ) -> JobRecord:
        return self._do(
            lambda tx: _jobs.renew_lease(tx, job_id, owner, lease_s, checkpoint, save=True)
        )

    def complete_job(
        self, job_id: str, owner: str, result: Any, *, max_result_bytes: int | None = None
    ) -> JobRecord:
        return self._do(lambda tx: _jobs.complete(tx, job_id, owner, result, max_result_bytes))

    def fail_job(
        self, job_id: str, owner: str, error: dict[str, Any], *, outcome_unknown: bool = False
    ) -> JobRecord:
        status = "outcome_unknown" if outcome_unknown else "failed"
        return self._do(lambda tx: _jobs.fail(tx, job_id, owner, error, status))

    def watch(self) -> Watch | None:
        return PgWatch(self._engine, self._target) if self.row_locks else None

    def claim_work(
        self, owner: str, *, lease_s: float = DEFAULT_LEASE_S, max_attempts: int = 3
    ) -> OutboxEvent | RunRecord | JobRecord | None:
        if not self.row_locks and not self._do(_claims.anything_claimable, read=True):
            return None  # SQLite: an idle look reads, and leaves the write lock to others
        return self._do(lambda tx: _claims.claim_work(tx, owner, lease_s, max_attempts))

    # Waits and the outbox

    def register_wait(
        self, session_id: str, tool_call_id: str, job_id: str, *, run_id: str | None = None
    ) -> WaitRecord:
        def op(tx: Tx) -> WaitRecord:
            tx.lock_session(session_id)
            return _waits.register(tx, session_id, tool_call_id, job_id, run_id=run_id)

        return self._do(op)

    def list_waits(self, session_id: str) -> list[WaitRecord]:
        return self._do(lambda tx: _waits.list_waits(tx, session_id), read=True)

    def claim_outbox_event(
        self, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> OutboxEvent | None:
        return self._do(lambda tx: _delivery.claim_event(tx, owner, lease_s))

    def deliver(
        self,
        event_id: int,
        message: ToolResultMessage,
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Delivery:
        take = None if owner is None else (owner, lease_s)
        return self._do(lambda tx: _delivery.deliver(tx, event_id, message, take))

    # Data plane

    def put_snapshot(
        self,
        *,
        owner: str,
        source: str,
        pages: Sequence[str],
        page_rows: Sequence[int] | None = None,
        locator: dict[str, Any] | None = None,
        version: str | None = None,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> SnapshotRecord:
        return self._do(
            lambda tx: _data.put_snapshot(
                tx,
                owner=owner,
                source=source,
                pages=pages,
                page_rows=page_rows,
                locator=locator,
                version=version,
                meta=meta,
                expires_at=expires_at,
            )
        )

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        return self._do(lambda tx: _data.get_snapshot(tx, snapshot_id), read=True)

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None:
        return self._do(lambda tx: _data.get_page(tx, snapshot_id, seq), read=True)

    def create_reference(
        self,
        *,
        owner: str,
        snapshot_id: str,
        kind: str,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> ReferenceRecord:
        return self._do(
            lambda tx: _data.create_reference(
                tx,
                owner=owner,
                snapshot_id=snapshot_id,
                kind=kind,
                meta=meta,
                expires_at=expires_at,
            )
        )

    def get_reference(self, ref_id: str) -> ReferenceRecord | None:
        return self._do(lambda tx: _data.get_reference(tx, ref_id), read=True)

    def purge_expired(self) -> int:
        return self._do(_data.purge_expired)

    def signing_key(self, name: str) -> str:
        return self._do(lambda tx: _data.signing_key(tx, name))
