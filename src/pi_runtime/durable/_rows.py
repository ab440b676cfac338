"""Rows to records."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row

from ..messages import message_from_dict
from .records import (
    ApprovalRecord,
    JobRecord,
    PageRecord,
    ReferenceRecord,
    RunRecord,
    SessionRecord,
    SnapshotRecord,
    StoredMessage,
    WaitRecord,
)


def session(row: Row[Any]) -> SessionRecord:
    return SessionRecord(
        id=row.id,
        status=row.status,
        version=row.version,
        message_count=row.message_count,
        agent=row.agent,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def message(row: Row[Any]) -> StoredMessage:
    return StoredMessage(
        seq=row.seq,
        message=message_from_dict(row.payload),
        run_id=row.run_id,
        created_at=row.created_at,
    )


def run(row: Row[Any]) -> RunRecord:
    return RunRecord(
        id=row.id,
        session_id=row.session_id,
        kind=row.kind,
        status=row.status,
        stop_reason=row.stop_reason,
        parent_run_id=row.parent_run_id,
        input=row.input,
        result=row.result,
        attempts=row.attempts,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def job(row: Row[Any]) -> JobRecord:
    return JobRecord(
        id=row.id,
        session_id=row.session_id,
        tool_call_id=row.tool_call_id,
        tool=row.tool,
        arguments=row.arguments,
        status=row.status,
        retry_safe=row.retry_safe,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        checkpoint=row.checkpoint,
        result=row.result,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def wait(row: Row[Any], *, job_done: bool = False) -> WaitRecord:
    return WaitRecord(
        session_id=row.session_id,
        tool_call_id=row.tool_call_id,
        job_id=row.job_id,
        run_id=row.run_id,
        status=row.status,
        event_id=row.event_id,
        created_at=row.created_at,
        resolved_at=row.resolved_at,
        job_done=job_done,
    )


def approval(row: Row[Any]) -> ApprovalRecord:
    return ApprovalRecord(
        session_id=row.session_id,
        tool_call_id=row.tool_call_id,
        run_id=row.run_id,
        tool=row.tool,
        arguments=row.arguments,
        fingerprint=row.fingerprint,
        status=row.status,
        decided_arguments=row.decided_arguments,
        reason=row.reason,
        job_id=row.job_id,
        created_at=row.created_at,
        decided_at=row.decided_at,
    )


def snapshot(row: Row[Any]) -> SnapshotRecord:
    return SnapshotRecord(
        id=row.id,
        owner=row.owner,
        source=row.source,
        locator=row.locator,
        version=row.version,
        digest=row.digest,
        page_count=row.page_count,
        row_count=row.row_count,
        meta=row.meta,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


def page(row: Row[Any]) -> PageRecord:
    return PageRecord(
        snapshot_id=row.snapshot_id, seq=row.seq, body=row.body, row_count=row.row_count
    )


def reference(row: Row[Any]) -> ReferenceRecord:
    return ReferenceRecord(
        id=row.id,
        owner=row.owner,
        snapshot_id=row.snapshot_id,
        kind=row.kind,
        meta=row.meta,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )
