"""A finished job as the tool-result message the model reads, under the original call id.

Results are encoded by a pluggable `ResultEncoder`: QRP1 by default (compact, with the
tool and job in its header), or the JSON text inline calls produce. Failures carry the
same `{kind, message, hint}` as any tool error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..messages import ToolErrorInfo, ToolResultMessage
from ..qrp1 import QRPEncodeError, encode
from ..tools import encode_result, truncate_result
from .records import OutboxEvent

ResultEncoder = Callable[[Any, str, str], str]
"""(job result as JSON, tool name, job id) → the text the model reads."""

DEFAULT_MAX_RESULT_BYTES = 16_000


def qrp1_result(value: Any, tool: str, job_id: str) -> str:
    """QRP1, naming the tool as the source and the job in an `x-job` header key; plain
    JSON text for a value QRP1 does not take."""
    try:
        return encode(value, source=tool, extra={"x-job": job_id})
    except QRPEncodeError:
        return encode_result(value)


def json_result(value: Any, tool: str, job_id: str) -> str:
    """The text an inline call of the tool would have produced."""
    return encode_result(value)


ENCODERS: dict[str, ResultEncoder] = {"qrp1": qrp1_result, "json": json_result}


def result_message(
    event: OutboxEvent,
    *,
    encoder: ResultEncoder = qrp1_result,
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> ToolResultMessage:
    """The message delivering `event`'s job result (or error) to the awaiting call."""
    if event.kind == "completed":
        text, _, _ = truncate_result(encoder(event.result, event.tool, event.job_id), max_bytes)
        return ToolResultMessage(tool_call_id=event.tool_call_id, name=event.tool, content=text)
    error = event.error or {"kind": "tool_error", "message": "the job failed"}
    info = ToolErrorInfo(
        kind=str(error.get("kind", "tool_error")),
        message=str(error.get("message", "")),
        hint=str(error.get("hint", "")),
    )
    content = json.dumps(
        {"kind": info.kind, "message": info.message, "hint": info.hint}, ensure_ascii=False
    )
    return ToolResultMessage(
        tool_call_id=event.tool_call_id, name=event.tool, content=content, is_error=True, error=info
    )
