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
    redacted here, before `tool_error_info` cuts them (a secret cut in two would not be
    recognised).
    """
    cls, kind, message, hint = _classify(exc)
    if hint:
        hint = redact(repair_text(hint))
    return cls, tool_error_info(repair_text(kind), redact(repair_text(message)), hint)


def _classify(exc: BaseException) -> tuple[ErrorClass, str, str, str | None]:
    """(class, kind, message, hint: None for the kind's registered one)."""
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
        return cls, exc.kind, exc.message, exc.hint
    message = _text(exc)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "transient", K.TIMEOUT, message, None
    if isinstance(exc, ConnectionError):
        return "transient", K.TRANSIENT, message, None
    if isinstance(exc, PermissionError):
        return "semantic", K.PERMISSION_DENIED, message, None
    if isinstance(exc, LookupError | FileNotFoundError):
        if isinstance(exc, KeyError) and exc.args:
            message = f"not found: {_quoted(exc.args[0])}"
        return "semantic", K.NOT_FOUND, message, None
    if isinstance(exc, ValueError | TypeError):
        return "semantic", K.INVALID_ARGUMENTS, message, None
    if isinstance(exc, MemoryError):
        return "unrecoverable", K.UNRECOVERABLE, "out of memory", None
    return "semantic", K.TOOL_ERROR, f"{type(exc).__name__}: {message}", None


def described(exc: BaseException) -> str:
    """`Type: message` of an exception from user code, or its type alone when the
    message is empty or its `__str__` raises."""
    said = _said(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


def _text(exc: BaseException) -> str:
    """`str(exc)`, or the name of its type when that is empty or raises (the tool's code)."""
    return _said(exc) or type(exc).__name__


def _said(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


def _quoted(key: object) -> str:
    try:
        return repr(key)
    except Exception:
        return f"a {type(key).__name__}"
