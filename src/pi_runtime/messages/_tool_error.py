"""The one tool-error wire format: `{kind, message, hint}` as a tool-result message.

Every failed or refused call the model reads, whoever refused it (the gate, a breaker, a
cancelled run, a job, a stored conversation with a hole), is built by `tool_error_result`,
so the content is always the same JSON (`ensure_ascii=False`: the model reads the words,
not escapes) and `error` always holds the same three fields.

`ToolErrorKind` names every kind the runtime itself raises, each with the hint the model
reads when the raiser gives none. A tool may raise kinds of its own; those get the
generic `tool_error` hint. A test scans the source so no kind escapes the registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ._model import ToolErrorInfo, ToolResultMessage


class ToolErrorKind(StrEnum):
    """Every error kind the runtime raises. The values are wire names: add, never rename."""

    # refused by the gate before running
    UNKNOWN_TOOL = "unknown_tool"
    PERMISSION_DENIED = "permission_denied"
    TRUNCATED_CALL = "truncated_call"
    ARGUMENTS_TOO_LARGE = "arguments_too_large"
    INVALID_ARGUMENTS = "invalid_arguments"
    # refused by the loop's breakers
    TOOL_LIMIT = "tool_limit"
    REPEATED_CALL = "repeated_call"
    # the classifier's kinds for what a tool raised
    TIMEOUT = "timeout"
    TRANSIENT = "transient"
    NOT_FOUND = "not_found"
    TOOL_ERROR = "tool_error"
    UNRECOVERABLE = "unrecoverable"
    SECURITY = "security"
    # calls that never got a result
    CANCELLED = "cancelled"
    MISSING_RESULT = "missing_result"
    OUTCOME_UNKNOWN = "outcome_unknown"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    # a person declined a call that needed their approval
    REJECTED = "rejected"
    # the data plane: tasks, references, cursors
    TASK_FAILED = "task_failed"
    TASK_CANCELLED = "task_cancelled"
    REFERENCE_INVALID = "reference_invalid"
    REFERENCE_NOT_FOUND = "reference_not_found"
    REFERENCE_FORBIDDEN = "reference_forbidden"
    REFERENCE_EXPIRED = "reference_expired"
    REFERENCE_MISMATCH = "reference_mismatch"
    CURSOR_INVALID = "cursor_invalid"
    CURSOR_EXPIRED = "cursor_expired"
    CURSOR_MISMATCH = "cursor_mismatch"
    CURSOR_FORBIDDEN = "cursor_forbidden"
    # a sub-agent (`Agent.as_tool`) that did not finish its task
    SUBAGENT_FAILED = "subagent_failed"


K = ToolErrorKind

TOOL_ERROR_HINTS: Mapping[ToolErrorKind, str] = {
    K.UNKNOWN_TOOL: "Call one of the available tools by its exact name.",
    K.PERMISSION_DENIED: "This action is not allowed here. Do not retry it; tell the user.",
    K.TRUNCATED_CALL: "Call again with shorter arguments, or pass large data by reference.",
    K.ARGUMENTS_TOO_LARGE: "Send less data: pass a reference or an identifier instead of "
    "the content.",
    K.INVALID_ARGUMENTS: "Fix the arguments to match the tool's schema and call again.",
    K.TOOL_LIMIT: "Answer now with what you have, and say what you could not do.",
    K.REPEATED_CALL: "Use that result, or try another way: other arguments, another tool, "
    "or answer with what you know.",
    K.TIMEOUT: "The tool took too long. Try a smaller scope or fewer items.",
    K.TRANSIENT: "A temporary failure persisted after retries. Try again later or another way.",
    K.NOT_FOUND: "Nothing matched. Check the identifiers, or search before fetching.",
    K.TOOL_ERROR: "The tool failed. Read the message, change the arguments or approach.",
    K.UNRECOVERABLE: "The tool cannot work right now; the run stops.",
    K.SECURITY: "The request was refused for security reasons; the run stops.",
    K.CANCELLED: "This call was not completed and its result will not come. Call it again "
    "only if it is still needed.",
    K.MISSING_RESULT: "The call may or may not have run. Check its effect before calling it again.",
    K.OUTCOME_UNKNOWN: "check the effect before calling the tool again",
    K.ATTEMPTS_EXHAUSTED: "The job was interrupted too often. Try a smaller task, or tell "
    "the user it could not finish.",
    K.REJECTED: "A person declined this call and it did not run. Do not call it again as "
    "it was: follow the reason given, or tell the user what was declined and why.",
    K.TASK_FAILED: "Fix the arguments or the approach and start the task again; it has no "
    "result pages.",
    K.TASK_CANCELLED: "The task was cancelled and has no result pages. Start it again if "
    "it is still needed.",
    K.REFERENCE_INVALID: "Pass a reference exactly as a tool returned it, e.g. ref:ref-0a1b2c3d.",
    K.REFERENCE_NOT_FOUND: "Use a reference a tool returned in this conversation; an "
    "expired one may have been purged. Run the producing tool again for a new one.",
    K.REFERENCE_FORBIDDEN: "This reference belongs to someone else; do not use it.",
    K.REFERENCE_EXPIRED: "The referenced data is no longer kept. Run the tool that produced "
    "it again (it reads the data as it is now) and use the new reference.",
    K.REFERENCE_MISMATCH: "Pass a reference of the kind this tool takes (see its description).",
    K.CURSOR_INVALID: "Pass the cursor exactly as the previous page gave it (its `next`), "
    "or start again without a cursor.",
    K.CURSOR_EXPIRED: "The result's retention ended. Run the query again without a cursor "
    "(it reads the data as it is now).",
    K.CURSOR_MISMATCH: "A cursor continues the query it came from: repeat that query's "
    "arguments unchanged, or drop the cursor to start this query from its first page.",
    K.CURSOR_FORBIDDEN: "This cursor belongs to someone else's result; do not use it.",
    K.SUBAGENT_FAILED: "The sub-agent did not finish (see why in the message). Give it a "
    "smaller or clearer task, or do it another way; do not send the same task again.",
}


def hint_for(kind: str) -> str:
    """The registered hint of `kind`; a kind of a tool's own gets the generic one."""
    try:
        return TOOL_ERROR_HINTS[ToolErrorKind(kind)]
    except ValueError:
        return TOOL_ERROR_HINTS[K.TOOL_ERROR]


MAX_MESSAGE_BYTES = 8_000
MAX_HINT_BYTES = 2_000
"""An error's words are cut to these (UTF-8) sizes: the model reads them in every later
request, so an error is held to the kind of bound a result is (`max_result_bytes`)."""

CUT_MARKER = "…[cut: the first {shown} of {total} bytes]"


def tool_error_info(kind: str, message: str, hint: str | None = None) -> ToolErrorInfo:
    """`{kind, message, hint}`; no hint (or an empty one) means the kind's registered one.
    A message or hint past its bound is cut, and says so."""
    return ToolErrorInfo(
        kind=str(kind),
        message=_clip(message, MAX_MESSAGE_BYTES),
        hint=_clip(hint, MAX_HINT_BYTES) if hint else hint_for(kind),
    )


def _clip(text: str, max_bytes: int) -> str:
    """`text` cut to `max_bytes` of UTF-8 with a marker saying how much it had."""
    if len(text) * 4 <= max_bytes:
        return text  # even at four bytes a character it fits: no need to encode it
    data = text.encode(errors="surrogatepass")  # repairing lone surrogates is not ours
    total = len(data)
    if total <= max_bytes:
        return text
    room = len(CUT_MARKER.format(shown=total, total=total).encode())
    head = data[: max(0, max_bytes - room)].decode(errors="ignore")  # no split character
    return head + CUT_MARKER.format(shown=len(head.encode()), total=total)


def error_info_of(error: Mapping[str, Any] | None) -> ToolErrorInfo:
    """A stored error dict (a job's) as the model reads it; missing fields filled in."""
    error = error or {}
    return tool_error_info(
        str(error.get("kind") or K.TOOL_ERROR),
        str(error.get("message") or "the job failed"),
        str(error.get("hint") or ""),
    )


def error_text(info: ToolErrorInfo) -> str:
    """The content of an error result: the three fields as JSON the model reads."""
    return json.dumps(
        {"kind": info.kind, "message": info.message, "hint": info.hint}, ensure_ascii=False
    )


def tool_error_result(tool_call_id: str, name: str, info: ToolErrorInfo) -> ToolResultMessage:
    """The tool-result message answering call `tool_call_id` of tool `name` with `info`."""
    return ToolResultMessage(
        tool_call_id=tool_call_id, name=name, content=error_text(info), is_error=True, error=info
    )
