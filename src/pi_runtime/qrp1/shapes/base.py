"""What every shape hands back: the header keys it sets and its body lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Body", "EncodeOptions", "same_shaped"]


@dataclass(frozen=True, slots=True)
class Body:
    """Header keys (`Header` field names) and the lines after the header."""

    header: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodeOptions:
    """Series hints; `offset` is the index of the first row in the whole result."""

    time_key: str | None = None
    t0: str | int | None = None
    step_ms: int | None = None
    offset: int = 0


def same_shaped(items: Sequence[Any]) -> list[str] | None:
    """The keys of a list of objects that all have the same keys, else None."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return None
    keys = list(items[0])
    key_set = set(keys)
    if any(len(item) != len(keys) or item.keys() != key_set for item in items[1:]):
        return None
    return keys
