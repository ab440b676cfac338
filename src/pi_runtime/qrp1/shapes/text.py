"""`text`: a string, verbatim after the header; `len` counts its code points.

Raw text reads best and needs no escaping; `len` tells where it ends, so a trailing line
break added on the way is ignored and a cut-off body is caught.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import QRPDecodeError, QRPEncodeError
from ..header import Header
from .base import Body, EncodeOptions

__all__ = ["decode_text", "encode_text"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_text(value: Any, options: EncodeOptions) -> Body | None:
    if not isinstance(value, str):
        raise QRPEncodeError(f"kind text takes a string, got {type(value).__name__}")
    if _LONE_SURROGATE.search(value):
        return None  # not UTF-8: JSON escapes carry it exactly
    return Body({"length": len(value)}, value.split("\n") if value else [])


def decode_text(header: Header, lines: list[str], first_lineno: int) -> tuple[Any, int]:
    assert header.length is not None
    body = "\n".join(lines)
    text, rest = body[: header.length], body[header.length :]
    if len(text) < header.length:
        raise QRPDecodeError(
            f"text has {len(text)} of len={header.length} characters (cut short?)",
            line=first_lineno + text.count("\n"),
            column=1,
        )
    if rest not in ("", "\n"):
        raise QRPDecodeError(
            f"text continues past len={header.length}",
            line=first_lineno + text.count("\n"),
            column=len(text) - text.rfind("\n"),
        )
    return text, len(lines)
