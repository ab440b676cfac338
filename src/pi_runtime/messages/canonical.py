"""Canonical hashing of tool calls: the same action hashes the same however it is spelled."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._json import parse_object

_SPELLED_ONE_WAY = frozenset({str, int, bool, type(None)})
"""Value types with one spelling only: nothing to canonicalise in them."""


def canonical_value(value: Any) -> Any:
    """`value` with spelling removed: keys sorted later by dumps, `1.0` → `1`, `-0.0` → `0`."""
    if (
        type(value) is dict
        and all(type(key) is str for key in value)
        and _SPELLED_ONE_WAY.issuperset(map(type, value.values()))
    ):
        return value  # most arguments: flat, string keys, no float among the values
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_value(v) for v in value]
    return str(value)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Built once: `json.dumps` with options builds an encoder per call (every turn hashes)."""


def canonical_json(value: Any) -> str:
    return _ENCODER.encode(canonical_value(value))


def action_hash(name: str, arguments: dict[str, Any] | None, raw: str) -> str:
    """Hash of a tool call. Unparseable arguments hash by their text without whitespace."""
    if arguments is None:
        arguments = parse_object(raw)[0]  # adapters may leave parsing to the gate
    body = canonical_json(arguments) if arguments is not None else "".join(raw.split())
    return hashlib.sha256(f"{name}\x1f{body}".encode(errors="surrogatepass")).hexdigest()[:24]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:24]
