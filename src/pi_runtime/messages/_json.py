"""Parsing the JSON a model wrote for tool arguments, with the limits every reader needs.

Two things Python's `json` accepts are not data a tool can trust: `NaN`, `Infinity`,
`-Infinity` (not JSON at all) and numbers too large for a float (`1e999` becomes inf).
Both are refused, naming where they sit. An escaped lone UTF-16 surrogate (`"\\ud800"`)
is valid JSON but no encoder can write it, so it is repaired to U+FFFD here, where the
model's text enters: the call goes on, and nothing after it meets a lone surrogate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ._text import has_surrogates, repair_value

MAX_ARGUMENT_DEPTH = 64
"""Arguments nested deeper than this are refused: no schema needs it, and deep nesting
would exhaust the stack of every recursive reader (hashing, validation, serialisation)."""

Path = tuple[str | int, ...]


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


def json_path(path: Sequence[Any]) -> str:
    """`("items", 0, "qty")` as `$.items[0].qty`: how errors name a place in arguments."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class _NonFinite:
    """A number literal that has no finite float, kept as written to report it."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _parse_float(literal: str) -> float | _NonFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NonFinite(literal)


def find_non_finite(value: Any) -> tuple[Path, Any] | None:
    """Where the first NaN or ±Infinity in a JSON-like `value` sits, and what it is."""
    stack: list[tuple[Any, Path]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if (isinstance(item, float) and not math.isfinite(item)) or isinstance(item, _NonFinite):
            return path, item
        if isinstance(item, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(item))))
    return None


_FLAT = frozenset({str, int, bool, type(None)})
"""Value types that neither nest nor can be a non-finite number."""

_DECODER = json.JSONDecoder(parse_constant=_NonFinite, parse_float=_parse_float)
"""Built once: `json.loads` with these hooks builds a decoder per call, twice the parse."""


def _loads(raw: str) -> Any:
    if raw.startswith("\ufeff"):
        return json.loads(raw)  # raises, saying why, as it always did
    if raw[:1] == "{":
        # what `decode` does, without its two scans for whitespace around the value:
        # arguments mostly have none (every call is parsed). Anything else, an error
        # included, goes through `decode`, which says why as it always did.
        try:
            value, end = _DECODER.raw_decode(raw)
        except ValueError:
            end = -1
        if end == len(raw):
            return value
    return _DECODER.decode(raw)


def parse_object(raw: str) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object in `raw`, "") or (None, why it is not a usable one)."""
    try:
        value = _loads(raw)
    except RecursionError:
        return None, f"Arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels."
    except ValueError as exc:
        return None, f"Arguments are not valid JSON: {exc}."
    if not isinstance(value, dict):
        got = "float" if isinstance(value, _NonFinite) else type(value).__name__
        return None, f"Arguments must be a JSON object, got {got}."
    # most arguments are flat: no nesting to measure and no float to check
    flat = _FLAT.issuperset(map(type, value.values()))
    if not flat and not depth_within(value, MAX_ARGUMENT_DEPTH):
        return None, f"Arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels."
    if "\\u" in raw or has_surrogates(raw):
        value = repair_value(value)  # before any message can quote a key
    found = None if flat else find_non_finite(value)
    if found is not None:
        path, bad = found
        literal = bad.literal if isinstance(bad, _NonFinite) else repr(bad)
        return None, (
            f"{json_path(path)}: {literal} is not a finite number (JSON has no NaN or Infinity)."
        )
    return value, ""
