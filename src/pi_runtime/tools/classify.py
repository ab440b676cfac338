"""The runtime's error classifier: tools raise plain exceptions, the runtime decides.

Classes (seed 001 §7): `semantic` goes back to the model; `transient` is retried with
backoff and then goes back; `unrecoverable` stops the run; `security` stops it with an
audit event.

Exception messages are outside text: a client library may put an API key or a
credentialed URL into one. What the model (and the trace) reads is redacted.
"""

from __future__ import annotations

import asyncio
from typing import Literal, TypeAlias

from ..exceptions import (
    SecurityViolation,
    ToolFailure,
    TransientError,
    UnrecoverableError,
)
from ..messages import ToolErrorInfo, redact, repair_text

ErrorClass: TypeAlias = Literal["semantic", "transient", "unrecoverable", "security"]

_HINTS = {
    "timeout": "The tool took too long. Try a smaller scope or fewer items.",
    "transient": "A temporary failure persisted after retries. Try again later or another way.",
    "not_found": "Nothing matched. Check the identifiers, or search before fetching.",
    "invalid_arguments": "Fix the arguments to match the tool's schema and call again.",
    "permission_denied": "This action is not allowed here. Do not retry it; tell the user.",
    "tool_error": "The tool failed. Read the message, change the arguments or approach.",
    "unrecoverable": "The tool cannot work right now; the run stops.",
    "security": "The request was refused for security reasons; the run stops.",
}


def hint_for(kind: str) -> str:
    return _HINTS.get(kind, _HINTS["tool_error"])


def classify(exc: BaseException) -> tuple[ErrorClass, ToolErrorInfo]:
    """The class of a tool's exception and what the model should read about it.

    The words come from the tool: lone surrogates in them are repaired and secrets
    redacted here.
    """
    cls, info = _classify(exc)
    kind = repair_text(info.kind)
    message, hint = redact(repair_text(info.message)), redact(repair_text(info.hint))
    if kind is info.kind and message is info.message and hint is info.hint:
        return cls, info
    return cls, ToolErrorInfo(kind=kind, message=message, hint=hint)


def _classify(exc: BaseException) -> tuple[ErrorClass, ToolErrorInfo]:
    if isinstance(exc, ToolFailure):
        cls: ErrorClass
        if isinstance(exc, SecurityViolation):
            cls = "security"
        elif isinstance(exc, UnrecoverableError):
            cls = "unrecoverable"
        elif isinstance(exc, TransientError):
            cls = "transient"
        else:
            cls = "semantic"
        return cls, ToolErrorInfo(
            kind=exc.kind, message=exc.message, hint=exc.hint or hint_for(exc.kind)
        )
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "transient", ToolErrorInfo(kind="timeout", message=message, hint=hint_for("timeout"))
    if isinstance(exc, ConnectionError):
        return "transient", ToolErrorInfo(
            kind="transient", message=message, hint=hint_for("transient")
        )
    if isinstance(exc, PermissionError):
        return "semantic", ToolErrorInfo(
            kind="permission_denied", message=message, hint=hint_for("permission_denied")
        )
    if isinstance(exc, LookupError | FileNotFoundError):
        if isinstance(exc, KeyError) and exc.args:
            message = f"not found: {exc.args[0]!r}"
        return "semantic", ToolErrorInfo(
            kind="not_found", message=message, hint=hint_for("not_found")
        )
    if isinstance(exc, ValueError | TypeError):
        return "semantic", ToolErrorInfo(
            kind="invalid_arguments", message=message, hint=hint_for("invalid_arguments")
        )
    if isinstance(exc, MemoryError):
        return "unrecoverable", ToolErrorInfo(
            kind="unrecoverable", message="out of memory", hint=hint_for("unrecoverable")
        )
    return "semantic", ToolErrorInfo(
        kind="tool_error", message=f"{type(exc).__name__}: {message}", hint=hint_for("tool_error")
    )
