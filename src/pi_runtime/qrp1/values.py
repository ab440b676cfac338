"""What counts as a JSON value here: what `json.loads` returns, nothing else."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import QRPEncodeError
from .escape import json_text

__all__ = ["check_json", "checked_json_text", "path_of"]

# int -> str refuses past 4,300 digits (Python's limit, json.dumps shares it): ~14,284 bits.
_SAFE_INT_BITS = 14_000
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def path_of(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if key.isidentifier():
        return f"{parent}.{key}"
    return f"{parent}[{json_text(key)}]"


def checked_json_text(value: Any) -> str:
    """`value` as compact JSON (see `json_text`), after making sure it is plain JSON.

    Fast path in C: plain JSON is exactly what comes back equal from a dump and a load
    (tuples, non-string keys, NaN, sets and joined surrogate pairs do not). Otherwise the
    slow walk finds the place to name in the error.
    """
    try:
        text = json_text(value)
        if json.loads(text) == value:
            return text
    except (TypeError, ValueError):
        pass
    except RecursionError:
        raise QRPEncodeError("value is nested too deeply to encode") from None
    check_json(value)
    raise QRPEncodeError("value does not come back equal from JSON")


def check_json(value: Any) -> None:
    """Raise `QRPEncodeError` naming the first place `value` is not plain JSON."""
    # Paths are built only for the error message: a trail is (parent trail, key).
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        item, trail = stack.pop()
        if isinstance(item, str):
            _check_text(item, trail)
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if item.bit_length() > _SAFE_INT_BITS:
                try:
                    int.__repr__(item)
                except ValueError:
                    raise QRPEncodeError(
                        f"{_path(trail)}: integer has more digits than Python converts to text"
                    ) from None
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise QRPEncodeError(f"{_path(trail)}: {item!r} is not a JSON number")
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise QRPEncodeError(
                        f"{_path(trail)}: object key {key!r} is a {type(key).__name__}, "
                        "JSON keys are strings"
                    )
                _check_text(key, trail)
                stack.append((child, (trail, key)))
        elif isinstance(item, list):
            stack.extend((child, (trail, i)) for i, child in enumerate(item))
        else:
            raise QRPEncodeError(
                f"{_path(trail)}: a {type(item).__name__} is not a JSON value "
                "(use dict, list, str, int, float, bool or None)"
            )


def _path(trail: Any) -> str:
    keys: list[str | int] = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    path = "$"
    for key in reversed(keys):
        path = path_of(path, key)
    return path


def _check_text(text: str, trail: Any) -> None:
    # JSON reads an escaped surrogate pair as one character, so such a string could not
    # come back as it went in (and json.loads never returns one).
    match = _SURROGATE_PAIR.search(text)
    if match is not None:
        raise QRPEncodeError(
            f"{_path(trail)}: string holds the surrogate pair {match.group()!a}, which JSON reads as "
            "one character; join it first (s.encode('utf-16', 'surrogatepass').decode('utf-16'))"
        )
