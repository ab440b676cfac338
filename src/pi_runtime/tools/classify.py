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
from ..messages import ToolErrorInfo, ToolErrorKind, redact, repair_text, tool_error_info

K = ToolErrorKind

ErrorClass: TypeAlias = Literal["semantic", "transient", "unrecoverable", "security"]


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
        return cls, tool_error_info(exc.kind, exc.message, exc.hint)
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "transient", tool_error_info(K.TIMEOUT, message)
    if isinstance(exc, ConnectionError):
        return "transient", tool_error_info(K.TRANSIENT, message)
    if isinstance(exc, PermissionError):
        return "semantic", tool_error_info(K.PERMISSION_DENIED, message)
    if isinstance(exc, LookupError | FileNotFoundError):
        if isinstance(exc, KeyError) and exc.args:
            message = f"not found: {exc.args[0]!r}"
        return "semantic", tool_error_info(K.NOT_FOUND, message)
    if isinstance(exc, ValueError | TypeError):
        return "semantic", tool_error_info(K.INVALID_ARGUMENTS, message)
    if isinstance(exc, MemoryError):
        return "unrecoverable", tool_error_info(K.UNRECOVERABLE, "out of memory")
    return "semantic", tool_error_info(K.TOOL_ERROR, f"{type(exc).__name__}: {message}")
