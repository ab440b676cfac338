"""A call waiting for a person's approval as an AG-UI interrupt, and the answer it takes."""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt

from ..tools.approval import PendingApproval

APPROVAL_REASON = "tool_approval"
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["approve", "reject"]},
        "arguments": {"type": "object", "description": "edited arguments (approve only)"},
        "reason": {"type": "string", "description": "why (reject only; the model reads it)"},
        "fingerprint": {"type": "string"},
    },
    "required": ["decision"],
}
"""The body `POST /v1/sessions/{id}/approvals/{call_id}` takes: an interrupt's answer."""


def interrupt(pending: PendingApproval, approvals_path: str | None) -> Interrupt:
    """The interrupt `RUN_FINISHED` carries for `pending`; `approvals_path` is where it is
    decided, `{call_id}` to be filled in."""
    metadata: dict[str, Any] = {
        "tool": pending.tool,
        "arguments": pending.arguments,
        "fingerprint": pending.fingerprint,
    }
    if approvals_path is not None:
        metadata["decide"] = approvals_path.format(call_id=pending.call_id)
    return Interrupt(
        id=pending.call_id,
        reason=APPROVAL_REASON,
        message=f"{pending.tool} waits for a person's approval",
        tool_call_id=pending.call_id,
        response_schema=DECISION_SCHEMA,
        metadata=metadata,
    )
