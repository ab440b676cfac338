"""Columns: `name:type` specs, types inferred from the values, constants hoisted.

A column whose value is the same in every row is written once, in its spec
(`currency:str=USD`), and not in the rows: it never changes, so it belongs in the header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .cells import COL_TYPES, ColType, infer_type, read_cell, write_cell
from .escape import escape_name, json_text
from .scan import LineScanner

__all__ = ["Column", "build_columns", "format_cols", "parse_cols", "same_value"]

_CONST_STOPS = ",|"


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its key, its cell type and, when hoisted, the value every row has."""

    name: str
    type: ColType
    const: Any = None
    is_const: bool = False


def same_value(a: Any, b: Any) -> bool:
    """Equal and spelled the same: `1`, `1.0` and `true` differ, and so do `0.0` and `-0.0`."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return float.__repr__(a) == float.__repr__(b)
    if isinstance(a, dict | list):
        return json_text(a) == json_text(b)
    return bool(a == b)


def build_columns(
    rows: Sequence[Mapping[str, Any]], keys: Sequence[str], *, hoist: bool = True
) -> list[Column]:
    """Columns for `keys` over `rows`; constants hoisted when there are at least two rows."""
    columns: list[Column] = []
    for key in keys:
        values = [row[key] for row in rows]
        col_type = infer_type(values)
        first = values[0] if values else None
        if hoist and len(values) >= 2 and all(same_value(v, first) for v in values[1:]):
            columns.append(Column(key, col_type, first, True))
        else:
            columns.append(Column(key, col_type))
    return columns


def format_cols(columns: Sequence[Column]) -> str:
    specs = []
    for column in columns:
        spec = f"{escape_name(column.name)}:{column.type}"
        if column.is_const:
            spec += "=" + write_cell(column.const, column.type, _CONST_STOPS)
        specs.append(spec)
    return ",".join(specs)


def parse_cols(scanner: LineScanner) -> tuple[Column, ...]:
    """Column specs up to the end of the line or the next header `|`."""
    if scanner.at_end() or scanner.peek() == "|":
        return ()
    columns: list[Column] = []
    names: set[str] = set()
    while True:
        start = scanner.pos
        name = scanner.read_text(":,|=")
        scanner.expect(":", "':' between a column name and its type")
        type_start = scanner.pos
        col_type = scanner.read_raw(",|=")
        if col_type not in COL_TYPES:
            raise scanner.error(
                f"unknown column type {col_type!r} (one of {', '.join(sorted(COL_TYPES))})",
                type_start,
            )
        if name in names:
            raise scanner.error(f"duplicate column {name!r}", start)
        names.add(name)
        if scanner.peek() == "=":
            if col_type == "dt_ms":
                raise scanner.error("a dt_ms column cannot be constant", scanner.pos)
            scanner.pos += 1
            const = read_cell(scanner, col_type, _CONST_STOPS)  # type: ignore[arg-type]
            columns.append(Column(name, col_type, const, True))  # type: ignore[arg-type]
        else:
            columns.append(Column(name, col_type))  # type: ignore[arg-type]
        if scanner.peek() != ",":
            return tuple(columns)
        scanner.pos += 1
