"""Tool return values to the text the model reads, cut to a byte limit with a marker.

A result is outside text like any other: lone UTF-16 surrogates in it (or in its keys)
become U+FFFD, and NaN, Infinity and -Infinity become the strings `"NaN"`, `"Infinity"`
and `"-Infinity"`, so the text is JSON every reader accepts. Strings rather than `null`:
the model should learn that a value was undefined or unbounded, not that it was missing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sized
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel

from ..exceptions import ToolError
from ..messages import repair_text, repair_value
from ..qrp1 import QRPEncodeError, encode
from .classify import described

ResultFormat = Literal["json", "qrp1"]
RESULT_FORMATS: tuple[ResultFormat, ...] = ("qrp1", "json")

TRUNCATION_MARKER = "\n…[truncated: showing the first {shown} of {total} bytes]"


def encode_tool_result(value: Any) -> str:
    """`encode_result` of what a tool returned; a value it cannot encode is the tool's
    failure (a `ToolError` saying so), not the model's arguments'."""
    try:
        return encode_result(value)
    except MemoryError:
        raise
    except Exception as exc:
        raise ToolError(f"the tool's result could not be encoded: {described(exc)}") from None


def encode_result(value: Any) -> str:
    """A tool's return value as text: strings as they are, anything else as compact JSON.

    An iterator that is not a sized collection (a generator, `map`) is read as a list of
    at most `MAX_ITERATOR_ITEMS` items: it may never end (`itertools.count()`).
    """
    if isinstance(value, str):
        return repair_text(value)
    if type(value) is int and value.bit_length() <= 64:
        return str(value)  # what JSON spells, without three conversions
    if isinstance(value, Iterator) and not isinstance(value, Sized):
        value = _first_items(value)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")  # the model's own aliases and serialisers
    try:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
    except UnicodeEncodeError:
        # a dict key holds a lone surrogate. Repair walks dicts and lists without a cycle
        # check, so json.dumps, which walks the same ones, refuses a cycle first.
        json.dumps(value, default=lambda _: None, skipkeys=True)
        plain = pydantic_core.to_jsonable_python(repair_value(value), fallback=str)
    # plain data is acyclic; its strings include what models, dataclasses and `str()` made
    return pydantic_core.to_json(repair_value(plain), inf_nan_mode="strings").decode()


MAX_ITERATOR_ITEMS = 10_000
"""Items read from a result that is an iterator (a generator, `map`): it may never end."""


def _first_items(items: Iterator[Any]) -> list[Any]:
    """The iterator's items as a list, up to `MAX_ITERATOR_ITEMS`, and a last item saying
    so when it had more (read in a sync tool's thread, under its timeout)."""
    head = list(itertools.islice(items, MAX_ITERATOR_ITEMS + 1))
    if len(head) > MAX_ITERATOR_ITEMS:
        head[MAX_ITERATOR_ITEMS:] = [f"…[cut: the first {MAX_ITERATOR_ITEMS} items]"]
    return head


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


def encode_text(
    value: Any,
    *,
    format: ResultFormat = "json",
    source: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A result as the model reads it: QRP1 when asked and the value fits it (`source`
    and `extra` go into its header), else the JSON text of `encode_result`."""
    if format == "qrp1":
        try:
            return encode(value, source=source, extra=dict(extra or {}))
        except QRPEncodeError:
            pass  # a value QRP1 does not take is written as JSON
    return encode_result(value)
