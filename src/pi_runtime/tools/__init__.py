"""Tools: `@tool` specs, the error classifier, and the gate every call passes."""

from .classify import ErrorClass, classify
from .gate import Attempt, Gate, Launcher, ToolOutcome, idempotency_key
from .result_text import encode_result, truncate_result
from .spec import IDEMPOTENCY_PARAM, SESSION_PARAM, ToolSpec, tool

__all__ = [
    "IDEMPOTENCY_PARAM",
    "SESSION_PARAM",
    "Attempt",
    "ErrorClass",
    "Gate",
    "Launcher",
    "ToolOutcome",
    "ToolSpec",
    "classify",
    "encode_result",
    "idempotency_key",
    "tool",
    "truncate_result",
]
