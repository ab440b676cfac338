"""Text from outside made safe to carry: lone UTF-16 surrogates become U+FFFD.

Outside text (a model's reply, a tool's result, argv, a provider's stream) can hold a
surrogate that has no partner: an escaped `\\ud800` in JSON, an emoji split across two
stream chunks, undecodable bytes in argv (`surrogateescape`). No encoder can write such
a string, so it is repaired where it enters; a proper pair (high then low) is joined
into the one character it spells.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import UserError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_NAME = 200
_Record = TypeVar("_Record", bound="DataclassInstance")


def has_surrogates(text: str) -> bool:
    """Whether `text` holds any UTF-16 surrogate code point (paired or not)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def repair_text(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    # `isascii` first: most text is ASCII, and it is several times cheaper than a search
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clipped(text: str, limit: int) -> str:
    """`text` at most `limit` characters; a cut one ends in `…` (within the limit)."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 0 else ""


def repair_value(value: Any) -> Any:
    """A JSON-like value with every string (keys included) repaired; others unchanged.

    Iterative, so arbitrarily deep values cannot exhaust the stack; returns the very
    object passed in when nothing needed repair.
    """
    if isinstance(value, str):
        return repair_text(value)
    if not isinstance(value, dict | list) or not _needs_repair(value):
        return value
    return _rebuild(value)


def _needs_repair(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            # keys and scalar values checked here, not pushed: most arguments are flat
            for key, child in item.items():
                if type(key) is str:
                    if not key.isascii() and _SURROGATE.search(key) is not None:
                        return True
                elif type(key) not in _PLAIN:
                    stack.append(key)
                kind = type(child)
                if kind is str:
                    if not child.isascii() and _SURROGATE.search(child) is not None:
                        return True
                elif kind not in _PLAIN:
                    stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _rebuild(value: Any) -> Any:
    # Post-order without recursion: each container is rebuilt after its children.
    root: list[Any] = [None]
    stack: list[tuple[Any, list[Any] | dict[str, Any], Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = repair_text(item)
        elif isinstance(item, dict):
            new: dict[str, Any] = {}
            parent[slot] = new
            for key, child in item.items():
                fixed = repair_text(key) if isinstance(key, str) else key
                new[fixed] = None
                stack.append((child, new, fixed))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, i) for i, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def repair_fields(record: _Record) -> _Record:
    """A dataclass (message, block, model response, event) with every string repaired.

    Strings in fields, in nested dataclasses, tuples, lists and dicts (keys included) are
    repaired; returns the very object when nothing needed repair. Repair a message before
    pydantic dumps it: pydantic turns a surrogate in a dict key into one U+FFFD per byte.
    """
    kind = type(record)
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(record))
    changes: dict[str, Any] = {}
    for name in names:
        value = getattr(record, name)
        kind = type(value)
        if kind in _PLAIN or (kind is str and value.isascii()):
            continue  # most fields of a clean answer, without a call each
        # a record seen before (an answer's usage) goes straight to its own fields
        fixed = repair_fields(value) if kind in _FIELD_NAMES else _repair_field(value)
        if fixed is not value:
            changes[name] = fixed
    return replace(record, **changes) if changes else record


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
"""Field names per dataclass: every model answer is repaired, so `fields()` is looked up once."""
_PLAIN = frozenset({type(None), bool, int, float})


def _repair_field(value: Any) -> Any:
    # the common cases first: the run repairs every model answer, mostly clean
    kind = type(value)
    if kind is str:
        return value if value.isascii() else repair_text(value)
    if kind in _PLAIN:
        return value
    if kind is dict or kind is list:  # tool arguments: no dataclass check needed
        return _rebuild(value) if _needs_repair(value) else value
    if kind in _FIELD_NAMES or (
        kind is not tuple and is_dataclass(value) and not isinstance(value, type)
    ):
        return repair_fields(value)
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            fixed = _repair_field(item)
            if fixed is not item:  # copy only from the first item that changed
                rest = tuple(_repair_field(later) for later in value[index + 1 :])
                return (*value[:index], fixed, *rest)
        return value
    return repair_value(value)


def check_keywords(operation: str, declared: Any, given: Mapping[str, object]) -> None:
    """Refuse keywords `declared` (a TypedDict a `**kwargs: Unpack[...]` names) does not
    know, and required ones left out, with UserError: such kwargs take any key at run time."""
    known: frozenset[str] = declared.__required_keys__ | declared.__optional_keys__
    unknown = sorted(set(given) - known)
    if unknown:
        raise UserError(
            f"{operation}() got unknown keyword arguments {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(declared.__annotations__)}"
        )
    missing = [key for key in declared.__annotations__ if key in declared.__required_keys__]
    missing = [key for key in missing if key not in given]
    if missing:
        raise UserError(f"{operation}() needs the keyword arguments {', '.join(missing)}")


def check_name(what: str, value: object) -> str:
    """A caller-chosen name or id (an owner, a session or run id, an embedder): non-empty,
    printable, at most 200 characters, no surrounding spaces; else UserError."""
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME:
        raise UserError(f"{what} must be a non-empty string of at most {_MAX_NAME} characters")
    if not value.isprintable() or value != value.strip():
        raise UserError(f"{what} must be printable, without surrounding spaces: {value!r}")
    return value
