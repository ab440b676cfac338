"""Rows of a columnar body: one line each, cells separated by `,`, in column order.

Hoisted (constant) columns are not in the rows, nor is a regular series' time column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .cells import cell_writer, parse_plain, read_cell
from .columns import Column
from .errors import QRPDecodeError
from .scan import LineScanner

__all__ = ["read_rows", "row_columns", "write_rows"]

# A line without these holds no escapes and no JSON text: splitting on "," is enough.
_NEEDS_SCANNER = re.compile(r'[\\"\[{]')


def row_columns(columns: Sequence[Column], *, implied_time: bool = False) -> list[Column]:
    """The columns whose cells are written in each row."""
    return [c for c in columns if not c.is_const and not (implied_time and c.type == "dt_ms")]


def write_rows(rows: Sequence[Mapping[str, Any]], live: Sequence[Column]) -> list[str]:
    pairs = [(c.name, cell_writer(c.type)) for c in live]
    return [",".join([write(row[name]) for name, write in pairs]) for row in rows]


def _parse_row(line: str, lineno: int, live: Sequence[Column]) -> list[Any]:
    if not live:
        if line:
            raise QRPDecodeError(
                "expected an empty row (every column is in the header)", line=lineno, column=1
            )
        return []
    if _NEEDS_SCANNER.search(line) is None:
        parts = line.split(",")
        if len(parts) != len(live):
            raise QRPDecodeError(
                f"row has {len(parts)} cells, expected {len(live)}", line=lineno, column=1
            )
        cells = []
        pos = 0
        for raw, column in zip(parts, live, strict=True):
            try:
                cells.append(parse_plain(raw, column.type))
            except ValueError as exc:
                raise QRPDecodeError(
                    f"column {column.name!r}: {exc}", line=lineno, column=pos + 1
                ) from None
            pos += len(raw) + 1
        return cells
    scanner = LineScanner(line, lineno)
    cells = []
    for index, column in enumerate(live):
        if index:
            if scanner.at_end():
                raise scanner.error(f"row has {index} cells, expected {len(live)}")
            scanner.expect(",", f"',' before the cell of column {column.name!r}")
        cells.append(read_cell(scanner, column.type, ","))
    if not scanner.at_end():
        raise scanner.error(f"row has more than {len(live)} cells")
    return cells


def read_rows(
    lines: Sequence[str],
    first_lineno: int,
    columns: Sequence[Column],
    live: Sequence[Column],
    count: int,
) -> list[dict[str, Any]]:
    """`count` rows from `lines`; columns neither live nor constant come back as None."""
    if len(lines) < count:
        raise QRPDecodeError(
            f"the document ends after {len(lines)} of {count} rows (cut short?)",
            line=first_lineno + len(lines),
            column=1,
        )
    live_names = {c.name for c in live}
    rows: list[dict[str, Any]] = []
    for index in range(count):
        cells = iter(_parse_row(lines[index], first_lineno + index, live))
        row: dict[str, Any] = {}
        for column in columns:
            if column.is_const:
                row[column.name] = (
                    _copied(column.const) if isinstance(column.const, dict | list) else column.const
                )
            elif column.name in live_names:
                row[column.name] = next(cells)
            else:
                row[column.name] = None  # filled by the shape (a regular series' time)
        rows.append(row)
    return rows


def _copied(value: Any) -> Any:
    """A copy of a JSON value, each row its own; without recursion, so a constant nested
    as deeply as the JSON reader takes never exhausts the stack."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, dict):
            fields: dict[str, Any] = dict.fromkeys(item)  # keys in their order, values below
            parent[slot] = fields
            stack.extend((child, fields, key) for key, child in item.items())
        elif isinstance(item, list):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, index) for index, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]
