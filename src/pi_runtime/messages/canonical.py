"""Canonical hashing of tool calls: the same action hashes the same however it is spelled."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._json import parse_object

_SPELLED_ONE_WAY = frozenset({str, int, bool, type(None)})
"""Value types with one spelling only: nothing to canonicalise in them."""
_STRINGS = frozenset({str})


def _flat(value: Any) -> bool:
    """A dict of string keys and values of one spelling: already canonical."""
    return (
        type(value) is dict
        and _STRINGS.issuperset(map(type, value))
        and _SPELLED_ONE_WAY.issuperset(map(type, value.values()))
    )


def canonical_value(value: Any) -> Any:
    """`value` with spelling removed: keys sorted later by dumps, `1.0` → `1`, `-0.0` → `0`."""
    if _flat(value):
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


_WORDS = {True: "true", False: "false", None: "null"}


def canonical_json(value: Any) -> str:
    if not _flat(value):
        return _ENCODER.encode(canonical_value(value))
    # A flat object spelled as the encoder spells it, without the C encoder and closure
    # the encoder sets up on every call (every tool call is hashed): sorted keys, each
    # string through the encoder's own escaping, ints as `int.__repr__`, no spaces.
    encode = _ENCODER.encode
    parts = []
    for key, item in sorted(value.items()):
        kind = type(item)
        spelled = (
            encode(item) if kind is str else int.__repr__(item) if kind is int else _WORDS[item]
        )
        parts.append(f"{encode(key)}:{spelled}")
    return "{" + ",".join(parts) + "}"


def action_hash(name: str, arguments: dict[str, Any] | None, raw: str) -> str:
    """Hash of a tool call. Unparseable arguments hash by their text without whitespace."""
    if arguments is None:
        arguments = parse_object(raw)[0]  # adapters may leave parsing to the gate
    body = canonical_json(arguments) if arguments is not None else "".join(raw.split())
    return hashlib.sha256(f"{name}\x1f{body}".encode(errors="surrogatepass")).hexdigest()[:24]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:24]
