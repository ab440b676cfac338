"""The approval methods of `SqlStore`, each one transaction."""

from __future__ import annotations

from typing import Any

from ..messages import ToolResultMessage
from . import _approvals
from ._sql_base import SqlBase
from .records import ApprovalRecord, Decided
from .store import DEFAULT_LEASE_S


class ApprovalsSql(SqlBase):
    """`Approvals` over SQL."""

    def list_approvals(self, session_id: str) -> list[ApprovalRecord]:
        return self._do(lambda tx: _approvals.list_for(tx, session_id), read=True)

    def approve_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        arguments: dict[str, Any],
        fingerprint: str | None = None,
        owner: str,
        lease_s: float = DEFAULT_LEASE_S,
        retry_safe: bool = True,
        max_attempts: int = 3,
    ) -> ApprovalRecord:
        return self._do(
            lambda tx: _approvals.approve(
                tx,
                session_id,
                tool_call_id,
                arguments=arguments,
                expected=fingerprint,
                owner=owner,
                lease_s=lease_s,
                retry_safe=retry_safe,
                max_attempts=max_attempts,
            )
        )

    def settle_approval(
        self,
        session_id: str,
        tool_call_id: str,
        message: ToolResultMessage,
        *,
        owner: str,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Decided:
        return self._do(
            lambda tx: _approvals.settle(
                tx, session_id, tool_call_id, message, take=(owner, lease_s)
            )
        )

    def reject_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        reason: str,
        message: ToolResultMessage,
        fingerprint: str | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Decided:
        take = None if owner is None else (owner, lease_s)
        return self._do(
            lambda tx: _approvals.reject(
                tx,
                session_id,
                tool_call_id,
                reason=reason,
                message=message,
                expected=fingerprint,
                take=take,
            )
        )
