"""`record`: one object, a field per line (`key=value`).

Values are bare text when that reads back unchanged, else JSON. Only a truly nested shape
is expanded: a list of same-shaped objects becomes a sub-table (`key=#N cols`, N rows
below), when that is shorter than its JSON. Other nested values stay inline JSON.
"""

from __future__ import annotations

from typing import Any

from ..cells import read_cell, write_cell
from ..columns import build_columns, format_cols, parse_cols
from ..errors import QRPDecodeError, QRPEncodeError
from ..escape import escape_name
from ..header import Header
from ..rows import read_rows, row_columns, write_rows
from ..scan import LineScanner
from .base import Body, EncodeOptions, same_shaped

__all__ = ["decode_record", "encode_record"]


def _sub_table(value: Any) -> list[str] | None:
    if not isinstance(value, list) or len(value) < 2:
        return None
    keys = same_shaped(value)
    if not keys:
        return None
    columns = build_columns(value, keys)
    return [f"#{len(value)} {format_cols(columns)}", *write_rows(value, row_columns(columns))]


def _size(lines: list[str]) -> int:
    return sum(len(line.encode()) + 1 for line in lines)


def encode_record(value: Any, options: EncodeOptions) -> Body | None:
    if isinstance(value, list):
        raise QRPEncodeError("kind record takes an object; a list is a table or a series")
    if isinstance(value, str):
        raise QRPEncodeError("kind record takes an object; a string is text")
    if not isinstance(value, dict):
        return None  # a lone number, boolean or null rides as body=json
    lines: list[str] = []
    for key, item in value.items():
        inline = [f"{escape_name(key)}={write_cell(item, 'any', '')}"]
        table = _sub_table(item)
        if table is not None:
            table[0] = f"{escape_name(key)}={table[0]}"
            if _size(table) < _size(inline):
                inline = table
        lines.extend(inline)
    return Body({"fields": len(value)}, lines)


def decode_record(header: Header, lines: list[str], first_lineno: int) -> tuple[Any, int]:
    assert header.fields is not None
    record: dict[str, Any] = {}
    index = 0
    for number in range(header.fields):
        if index >= len(lines):
            raise QRPDecodeError(
                f"the document ends after {number} of {header.fields} fields (cut short?)",
                line=first_lineno + index,
                column=1,
            )
        scanner = LineScanner(lines[index], first_lineno + index)
        key = scanner.read_text("=")
        scanner.expect("=", "'=' after the field name")
        if key in record:
            raise scanner.error(f"duplicate field {key!r}", 0)
        index += 1
        if scanner.peek() == "#":
            record[key], used = _read_sub_table(scanner, lines, index, first_lineno)
            index += used
            continue
        record[key] = read_cell(scanner, "any", "")
        if not scanner.at_end():
            raise scanner.error("unexpected text after the value")
    return record, index


def _read_sub_table(
    scanner: LineScanner, lines: list[str], index: int, first_lineno: int
) -> tuple[list[dict[str, Any]], int]:
    scanner.pos += 1
    count_pos = scanner.pos
    count = scanner.read_raw(" ")
    if not count.isdigit() or not count.isascii():
        raise scanner.error(f"expected a row count after '#', found {count!r}", count_pos)
    try:
        number = int(count)
    except ValueError:  # past Python's int/str digit limit
        raise scanner.error(
            f"row count has {len(count)} digits, too many to read", count_pos
        ) from None
    scanner.expect(" ", "a space between the row count and the columns")
    columns = parse_cols(scanner)
    if not scanner.at_end():
        raise scanner.error("unexpected text after the columns")
    rows = read_rows(lines[index:], first_lineno + index, columns, row_columns(columns), number)
    return rows, number
