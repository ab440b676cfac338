"""A session as JSON for people and programs (`pi session show --json`).

    {"session_id": "s1", "status": "completed", "version": 7, "message_count": 5,
     "agent": {...}, "created_at": "…", "updated_at": "…",
     "messages": [{"seq": 0, "run_id": "run-…", "role": "user", "content": "…"}, …],
     "runs":  [{"run_id", "kind", "status", "stop_reason", "parent_run_id", "attempts",
                "created_at", "started_at", "finished_at", "output", "error",
                "escalation"}, …],
     "waits": [{"tool_call_id", "job_id", "status", "run_id"}, …],
     "jobs":  [{"job_id", "tool", "tool_call_id", "status", "attempts", "error"}, …],
     "pending_approvals": [{"call_id", "tool", "arguments", "fingerprint", "run_id"}, …],
     "approvals": [{"call_id", "tool", "arguments", "fingerprint", "status", "run_id",
                    "decided_arguments", "reason", "job_id", "created_at", "decided_at"}, …]}

Messages have the shape of `RunResult.messages` (tool results with their
`tool_call_id`), plus their place `seq` and the `run_id` that wrote them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..messages import message_to_dict
from .errors import NotFound
from .records import ApprovalRecord, CancelResult, RunRecord
from .store import Store


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def session_view(store: Store, session_id: str) -> dict[str, Any]:
    """Everything about a session (NotFound if there is none)."""
    session = store.get_session(session_id)
    if session is None:
        raise NotFound(f"no session {session_id!r}")
    messages = [
        {"seq": m.seq, "run_id": m.run_id, **message_to_dict(m.message)}
        for m in store.load_messages(session_id)
    ]
    return {
        "session_id": session.id,
        "status": session.status,
        "version": session.version,
        "message_count": session.message_count,
        "agent": session.agent,
        "created_at": _time(session.created_at),
        "updated_at": _time(session.updated_at),
        "messages": messages,
        "runs": [run_view(r) for r in store.list_runs(session_id)],
        "waits": [
            {
                "tool_call_id": w.tool_call_id,
                "job_id": w.job_id,
                "status": w.status,
                "run_id": w.run_id,
            }
            for w in store.list_waits(session_id)
        ],
        "jobs": [
            {
                "job_id": j.id,
                "tool": j.tool,
                "tool_call_id": j.tool_call_id,
                "status": j.status,
                "attempts": j.attempts,
                "error": j.error,
            }
            for j in store.list_jobs(session_id)
        ],
        **approvals_view(store.list_approvals(session_id)),
    }


def approvals_view(approvals: list[ApprovalRecord]) -> dict[str, Any]:
    """The calls waiting for a person (as `RunResult.pending_approvals` lists them, with
    their run) and every decision taken."""
    return {
        "pending_approvals": [
            {**a.pending.to_dict(), "run_id": a.run_id} for a in approvals if a.status == "pending"
        ],
        "approvals": [
            {
                **a.pending.to_dict(),
                "status": a.status,
                "run_id": a.run_id,
                "decided_arguments": a.decided_arguments,
                "reason": a.reason,
                "job_id": a.job_id,
                "created_at": _time(a.created_at),
                "decided_at": _time(a.decided_at),
            }
            for a in approvals
        ],
    }


def run_view(run: RunRecord) -> dict[str, Any]:
    result = run.result or {}
    return {
        "run_id": run.id,
        "kind": run.kind,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "parent_run_id": run.parent_run_id,
        "attempts": run.attempts,
        "created_at": _time(run.created_at),
        "started_at": _time(run.started_at),
        "finished_at": _time(run.finished_at),
        "output": result.get("output"),
        "error": result.get("error"),
        "escalation": result.get("escalation"),
    }


def cancel_view(session_id: str, done: CancelResult) -> dict[str, Any]:
    """What a cancellation stopped (`pi session cancel --json`, the server's cancel)."""
    return {
        "session_id": session_id,
        "status": done.session.status,
        "waits_cancelled": list(done.waits_cancelled),
        "runs_cancelled": list(done.runs_cancelled),
        "jobs_cancelled": list(done.jobs_cancelled),
        "approvals_cancelled": list(done.approvals_cancelled),
    }
