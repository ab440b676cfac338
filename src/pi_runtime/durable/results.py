"""A finished job as the tool-result message the model reads, under the original call id.

Encoding and the byte cap are the tools' one pipeline (`pi_runtime.tools.render_result`),
so a delivered result reads like an inline one. The encoder is pluggable: QRP1 by default
(compact, with the tool and job in its header), or the JSON text inline calls produce.
The cap is the one the tool declared, carried by the job's completion event: delivery
never imports the tool. Failures carry the same `{kind, message, hint}` as any tool error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..exceptions import UserError
from ..messages import ToolResultMessage, error_info_of, tool_error_result
from ..tools import encode_text, truncate_result
from .records import JobEnding, JobRecord, OutboxEvent

ResultEncoder = Callable[[Any, str, str], str]
"""(job result as JSON, tool name, job id) → the text the model reads."""

DEFAULT_MAX_RESULT_BYTES = 16_000


def qrp1_result(value: Any, tool: str, job_id: str) -> str:
    """QRP1, naming the tool as the source and the job in an `x-job` header key; plain
    JSON text for a value QRP1 does not take."""
    return encode_text(value, format="qrp1", source=tool, extra={"x-job": job_id})


def json_result(value: Any, tool: str, job_id: str) -> str:
    """The text an inline call of the tool would have produced."""
    return encode_text(value)


ENCODERS: dict[str, ResultEncoder] = {"qrp1": qrp1_result, "json": json_result}


def max_result_bytes(event: OutboxEvent) -> int:
    """The cap the tool declared, as its completion event carries it (older events and
    hand-written ones: the default)."""
    return _cap(event.payload.get("max_result_bytes"))


def _cap(declared: Any) -> int:
    return declared if type(declared) is int and declared > 0 else DEFAULT_MAX_RESULT_BYTES


def result_message(
    event: OutboxEvent, *, encoder: ResultEncoder = qrp1_result
) -> ToolResultMessage:
    """The message delivering `event`'s job result (or error) to the awaiting call."""
    if event.kind == "completed":
        return _completed(event.tool_call_id, event.tool, event.job_id, event.result,
                          max_result_bytes(event), encoder)  # fmt: skip
    return tool_error_result(event.tool_call_id, event.tool, error_info_of(event.error))


def ending_message(
    job: JobRecord, ending: JobEnding, *, encoder: ResultEncoder = qrp1_result
) -> ToolResultMessage:
    """What `result_message` makes of the event `ending` writes for `job`, a job of a
    session's tool call: so the worker that ran it can deliver it in the same step."""
    if job.tool_call_id is None:
        raise UserError(f"job {job.id!r} answers no tool call")
    if ending.status == "succeeded":
        return _completed(job.tool_call_id, job.tool, job.id, ending.result,
                          _cap(ending.max_result_bytes), encoder)  # fmt: skip
    return tool_error_result(job.tool_call_id, job.tool, error_info_of(ending.error))


def _completed(
    call_id: str, tool: str, job_id: str, result: Any, cap: int, encoder: ResultEncoder
) -> ToolResultMessage:
    text, _, _ = truncate_result(encoder(result, tool, job_id), cap)
    return ToolResultMessage(tool_call_id=call_id, name=tool, content=text)
