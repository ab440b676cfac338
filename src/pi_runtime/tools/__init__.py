"""Tools: `@tool` specs, the error classifier, the gate every call passes, and the one
`execute` that runs a call inline or as a background job."""

from ._leaving import forget_left_behind, left_behind
from .approval import PendingApproval, check_edited, fingerprint
from .classify import ErrorClass, classify
from .execute import Attempt, Execution, backoff, call_key, execute, idempotency_key
from .gate import Gate, Launcher, ToolOutcome
from .result_text import (
    RESULT_FORMATS,
    ResultFormat,
    encode_result,
    encode_text,
    truncate_result,
)
from .spec import IDEMPOTENCY_PARAM, SESSION_PARAM, ToolSpec, tool

__all__ = [
    "IDEMPOTENCY_PARAM",
    "RESULT_FORMATS",
    "SESSION_PARAM",
    "Attempt",
    "ErrorClass",
    "Execution",
    "Gate",
    "Launcher",
    "PendingApproval",
    "ResultFormat",
    "ToolOutcome",
    "ToolSpec",
    "backoff",
    "call_key",
    "check_edited",
    "classify",
    "encode_result",
    "encode_text",
    "execute",
    "fingerprint",
    "forget_left_behind",
    "idempotency_key",
    "left_behind",
    "tool",
    "truncate_result",
]
