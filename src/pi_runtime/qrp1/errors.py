"""QRP1 errors: a value a kind cannot take, and text that is not a valid QRP1 document.

Both are `ValueError`s, so callers that already catch bad input keep working.
"""

from __future__ import annotations

from ..exceptions import PiError

__all__ = ["QRPDecodeError", "QRPEncodeError", "QRPError"]


class QRPError(PiError, ValueError):
    """Base of every QRP1 error."""


class QRPEncodeError(QRPError):
    """A value cannot be encoded as asked (not JSON, or not a value the kind takes)."""


class QRPDecodeError(QRPError):
    """Text is not a valid QRP1 document; `line` and `column` are 1-based."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.reason = message
        self.line = line
        self.column = column
