"""Column types and cells: what a value looks like between two separators, and back.

A cell is empty for null in every type. Numbers are written the way JSON spells them, so
a model reads the value itself (never scaled or delta-coded) and `float(repr(x)) == x`
keeps floats exact.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Literal, get_args

from .escape import escape_cell, json_text
from .scan import LineScanner

__all__ = [
    "COL_TYPES",
    "ColType",
    "cell_writer",
    "infer_type",
    "parse_plain",
    "read_cell",
    "write_cell",
]

ColType = Literal["str", "int", "f64", "num", "bool", "any", "dt_ms"]
COL_TYPES: frozenset[str] = frozenset(get_args(ColType))

INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")
NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
# Strings a reader could take for a number or a literal in another language: always quoted.
_NUMBER_LIKE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_WORD_LIKE = frozenset(
    ["true", "false", "null", "none", "nil", "nan", "inf", "-inf", "+inf", "infinity",
     "-infinity", "+infinity", "undefined"]
)  # fmt: skip


def infer_type(values: Iterable[Any]) -> ColType:
    """The narrowest type holding every non-null value; `any` when nothing narrower fits."""
    seen: set[str] = set()
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            seen.add("bool")
        elif isinstance(value, int):
            seen.add("int")
        elif isinstance(value, float):
            seen.add("f64")
        elif isinstance(value, str):
            seen.add("str")
        else:
            return "any"
    if len(seen) == 1:
        (only,) = seen
        return only  # type: ignore[return-value]  # one of the literal names above
    return "num" if seen == {"int", "f64"} else "any"


def _f64_text(value: float) -> str:
    # The column type already says "float", so `100.0` can be read from `100`.
    text = float.__repr__(value)
    return text[:-2] if text.endswith(".0") else text


@functools.cache
def _bare_unsafe(stops: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape("\\" + stops) + "\x00-\x1f\x7f\x85\u2028\u2029\ud800-\udfff]")


def _bare_ok(text: str, stops: str) -> bool:
    """Whether a string can be written unquoted in an `any` cell and read back as itself,
    without looking like something else to a reader."""
    return (
        bool(text)
        and text[0] not in '"[{#'
        and text == text.strip()
        and text.lower() not in _WORD_LIKE
        and _NUMBER_LIKE.fullmatch(text) is None
        and _bare_unsafe(stops).search(text) is None
    )


def write_cell(value: Any, col_type: ColType, stops: str = ",") -> str:
    """`value` as a cell of `col_type`; `stops` are the separators of the place it goes."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _f64_text(value) if col_type == "f64" else float.__repr__(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, str):
        if col_type == "str":
            return '""' if value == "" else escape_cell(value)
        if _bare_ok(value, stops):
            return value
    return json_text(value, header="|" in stops)


def _none_or(write: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda value: "" if value is None else write(value)


_TYPED_WRITERS: dict[str, Callable[[Any], str]] = {
    "f64": _none_or(lambda v: _f64_text(v)),
    "int": _none_or(int.__repr__),
    "dt_ms": _none_or(int.__repr__),
    "bool": _none_or(lambda v: "true" if v else "false"),
    "str": _none_or(lambda v: '""' if v == "" else escape_cell(v)),
}


def cell_writer(col_type: ColType) -> Callable[[Any], str]:
    """A row cell writer for a column whose values `infer_type` gave `col_type`."""
    return _TYPED_WRITERS.get(col_type) or (lambda value: write_cell(value, col_type))


def parse_plain(raw: str, col_type: ColType) -> Any:
    """A cell holding no escapes and no JSON text; raises ValueError saying what is wrong."""
    if raw == "":
        return None
    if col_type == "str":
        return raw
    if col_type == "any":
        if raw in _LITERALS:
            return _LITERALS[raw]
        return _number(raw, "num") if NUMBER_RE.fullmatch(raw) else raw
    if col_type == "bool":
        if raw not in ("true", "false"):
            raise ValueError(f"expected true or false, found {raw!r}")
        return raw == "true"
    return _number(raw, col_type)


def _number(raw: str, col_type: ColType) -> Any:
    if col_type in ("int", "dt_ms"):
        if not INT_RE.fullmatch(raw):
            raise ValueError(f"expected an integer, found {raw!r}")
    elif not NUMBER_RE.fullmatch(raw):
        raise ValueError(f"expected a number, found {raw!r}")
    if col_type in ("int", "dt_ms") or (col_type == "num" and INT_RE.fullmatch(raw)):
        try:
            return int(raw)
        except ValueError:  # past Python's int/str digit limit, as for json.loads
            raise ValueError(f"integer with {len(raw)} characters is too long") from None
    number = float(raw)
    if not math.isfinite(number):
        raise ValueError(f"number {raw!r} is out of the float range")
    return number


def read_cell(scanner: LineScanner, col_type: ColType, stops: str) -> Any:
    """Read one cell at the scanner's position; the scanner stops before the separator."""
    start = scanner.pos
    first = scanner.peek()
    if col_type == "str" and first == '"':
        scanner.pos += 1
        scanner.expect('"', 'a second quote (a cell starting with " is the empty string "")')
        if not scanner.at_end() and scanner.peek() not in stops:
            raise scanner.error('"" must be the whole cell; escape a leading quote as \\"')
        return ""
    if col_type == "str":
        return None if first == "" or first in stops else scanner.read_text(stops)
    if col_type == "any" and first and first in '"[{':
        return scanner.read_json()
    raw = scanner.read_raw(stops)
    try:
        return parse_plain(raw, col_type)
    except ValueError as exc:
        raise scanner.error(str(exc), start) from None
