"""`table`: a list of same-shaped objects as columns — names and types once, rows below.

Any other list can still be a table, carried as `body=json`.
"""

from __future__ import annotations

from typing import Any

from ..columns import build_columns
from ..errors import QRPEncodeError
from ..header import Header
from ..rows import read_rows, row_columns, write_rows
from .base import Body, EncodeOptions, same_shaped

__all__ = ["decode_table", "encode_table"]


def encode_table(value: Any, options: EncodeOptions) -> Body | None:
    if not isinstance(value, list):
        raise QRPEncodeError(f"kind table takes a list, got {type(value).__name__}")
    if not value:
        return Body({"rows": 0, "cols": ()}, [])
    keys = same_shaped(value)
    if keys is None:
        return None  # not columnar: only body=json can carry it
    columns = build_columns(value, keys)
    return Body(
        {"rows": len(value), "cols": tuple(columns)}, write_rows(value, row_columns(columns))
    )


def decode_table(header: Header, lines: list[str], first_lineno: int) -> tuple[Any, int]:
    assert header.rows is not None and header.cols is not None
    columns = header.cols
    rows = read_rows(lines, first_lineno, columns, row_columns(columns), header.rows)
    return rows, header.rows
