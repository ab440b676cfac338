"""The guardrails example's own checks: an input guardrail refusing requests for
credentials, one masking phone numbers, and the escalate hook.

Each is a plain function of one value returning `Allow()`, `Deny(reason)` or
`Rewrite(value)`; the agent file names them as MODULE:ATTR.
"""

from __future__ import annotations

import re
from typing import Any

from pi_runtime import Allow, Deny, EscalationContext, Rewrite

_CREDENTIALS = re.compile(r"password|passwd|api[ _-]?key|secret|密码|口令|密钥", re.IGNORECASE)
_PHONE = re.compile(r"(?<!\d)(1[3-9]\d)\d{4}(\d{4})(?!\d)")  # mainland mobile numbers


def no_credentials(message: str) -> Allow | Deny:
    """Refuse a request that asks for passwords or keys before any model reads it."""
    if _CREDENTIALS.search(message):
        return Deny("the request asks for credentials")
    return Allow()


def mask_phone_numbers(message: str) -> Allow | Rewrite:
    """Mask mobile numbers: the model needs no one's phone number to count orders."""
    masked = _PHONE.sub(r"\1****\2", message)
    return Rewrite(masked, "phone numbers masked") if masked != message else Allow()


def open_ticket(context: EscalationContext) -> dict[str, Any]:
    """Escalate a run that stopped or failed: here, a ticket id for the on-call person
    (a real hook would post to a pager or a queue)."""
    return {
        "ticket": f"OPS-{context.run_id[-6:]}",
        "queue": "security" if context.stop_reason == "security" else "agent-ops",
        "reason": context.stop_reason,
    }
