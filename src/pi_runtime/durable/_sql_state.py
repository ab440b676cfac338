"""The session and run methods of `SqlStore`, each one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message
from ..tools import PendingApproval
from . import _delivery, _runs, _sessions
from ._sql_base import SqlBase
from .records import (
    CancelResult,
    FinishedRun,
    RunRecord,
    SessionRecord,
    StoredMessage,
    TurnInputs,
)
from .store import DEFAULT_LEASE_S


class SessionsSql(SqlBase):
    """`SessionStore` over SQL."""

    def create_session(
        self, session_id: str | None = None, *, agent: dict[str, Any] | None = None
    ) -> SessionRecord:
        return self._do(lambda tx: _sessions.create_session(tx, session_id, agent))

    def get_session(self, session_id: str) -> SessionRecord | None:
        return self._do(lambda tx: _sessions.get_session(tx, session_id), read=True)

    def list_sessions(
        self, *, prefix: str = "", limit: int = 50, after: str | None = None
    ) -> list[SessionRecord]:
        return self._do(
            lambda tx: _sessions.list_sessions(tx, prefix=prefix, limit=limit, after=after),
            read=True,
        )

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


class RunsSql(SqlBase):
    """`RunStore` over SQL."""

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
        claimed = self._do(lambda tx: _runs.claim_runs(tx, [owner], lease_s, max_attempts))
        return next(iter(claimed), None)

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
        approvals: Sequence[PendingApproval] = (),
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
                approvals=approvals,
            )
        )

    def finish_cancelled_run(
        self,
        run_id: str,
        *,
        owner: str,
        result: dict[str, Any] | None = None,
        messages: Sequence[Message] = (),
    ) -> FinishedRun:
        return self._do(
            lambda tx: _runs.finish_cancelled_run(
                tx, run_id, owner=owner, result=result, messages=messages
            )
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._do(lambda tx: _runs.get_run(tx, run_id), read=True)

    def turn_inputs(self, run: RunRecord) -> TurnInputs:
        return self._do(lambda tx: _runs.turn_inputs(tx, run), read=True)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        return self._do(lambda tx: _runs.list_runs(tx, session_id), read=True)
