"""Parsing the JSON a model wrote for tool arguments, with the limits every reader needs."""

from __future__ import annotations

import json
from typing import Any

MAX_ARGUMENT_DEPTH = 64
"""Arguments nested deeper than this are refused: no schema needs it, and deep nesting
would exhaust the stack of every recursive reader (hashing, validation, serialisation)."""


def depth_within(value: Any, limit: int) -> bool:
    """Whether no list or object in `value` is nested deeper than `limit` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def parse_object(raw: str) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object in `raw`, "") or (None, why it is not a usable one)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        return None, f"Arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels."
    except ValueError as exc:
        return None, f"Arguments are not valid JSON: {exc}."
    if not isinstance(value, dict):
        return None, f"Arguments must be a JSON object, got {type(value).__name__}."
    if not depth_within(value, MAX_ARGUMENT_DEPTH):
        return None, f"Arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels."
    if "\\u" in raw or "\\U" in raw:
        # an escaped lone surrogate is valid JSON but not text any encoder can write
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            return None, "Arguments contain an unpaired UTF-16 surrogate escape (e.g. \\ud800)."
    return value, ""
