"""Tool return values to the text the model reads, cut to a byte limit with a marker."""

from __future__ import annotations

from typing import Any

import pydantic_core
from pydantic import BaseModel

TRUNCATION_MARKER = "\n…[truncated: showing the first {shown} of {total} bytes]"


def encode_result(value: Any) -> str:
    """A tool's return value as text: strings verbatim, anything else as compact JSON."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, BaseModel):
        text = value.model_dump_json()
    else:
        text = pydantic_core.to_json(value, fallback=str).decode()
    try:
        text.encode()
    except UnicodeEncodeError:
        # lone surrogates cannot be written anywhere; keep them visible as escapes
        text = text.encode("utf-8", "backslashreplace").decode()
    return text


def truncate_result(text: str, max_bytes: int) -> tuple[str, int, bool]:
    """(text cut to `max_bytes` with an explicit marker, total bytes, whether it was cut)."""
    data = text.encode()
    total = len(data)
    if total <= max_bytes:
        return text, total, False
    marker_room = len(TRUNCATION_MARKER.format(shown=total, total=total).encode())
    keep = max(0, max_bytes - marker_room)
    head = data[:keep].decode(errors="ignore")  # never split a UTF-8 sequence
    shown = len(head.encode())
    return head + TRUNCATION_MARKER.format(shown=shown, total=total), total, True
