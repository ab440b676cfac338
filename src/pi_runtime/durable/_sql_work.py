"""The job and outbox methods of `SqlStore`, each one transaction."""

from __future__ import annotations

from typing import Any

from ..exceptions import UserError
from ..messages import ToolResultMessage
from . import _delivery, _jobs, _runs, _waits
from ._sql_base import SqlBase
from ._tx import Tx
from .records import Delivery, FinishedJob, JobEnding, JobRecord, OutboxEvent, WaitRecord
from .store import DEFAULT_LEASE_S


class JobsSql(SqlBase):
    """`JobQueue` over SQL."""

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
        return next(iter(self._do(lambda tx: _jobs.claim_jobs(tx, [owner], lease_s))), None)

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


class OutboxSql(SqlBase):
    """`Outbox` over SQL."""

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
        return next(iter(self._do(lambda tx: _delivery.claim_events(tx, [owner], lease_s))), None)

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

    def finish_job(
        self,
        job_id: str,
        owner: str,
        ending: JobEnding,
        *,
        message: ToolResultMessage | None = None,
        take: bool = False,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> FinishedJob:
        held = (owner, lease_s) if take else None
        return self._do(lambda tx: _delivery.finish_job(tx, job_id, owner, ending, message, held))
