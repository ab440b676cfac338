"""Escaping text for the three places it can appear: header values, cells, names.

Every escape starts with a backslash. Writers escape only what their place needs; readers
accept every escape everywhere (see `scan.unescape_char`), so one reader serves all places.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["escape_cell", "escape_header", "escape_name", "json_text"]


def _table(extra: str) -> dict[int, str]:
    table = {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r"}
    # Other control characters, Unicode line breaks and lone surrogates would break lines
    # or UTF-8 on the way to the model: they are spelled as \uXXXX.
    for code in [*range(0x20), 0x85, 0x2028, 0x2029, *range(0xD800, 0xE000)]:
        if code != ord("\t"):
            table.setdefault(code, f"\\u{code:04X}")
    for char in extra:
        table[ord(char)] = "\\" + char
    return table


_HEADER = _table("|")
_CELL = _table("|,")
_NAME = _table("|,:=")
_JSON_UNSAFE = re.compile("[\ud800-\udfff\x85\u2028\u2029]")
_JSON_UNSAFE_HEADER = re.compile("[\ud800-\udfff\x85\u2028\u2029|]")


def escape_header(text: str) -> str:
    """A header value: `|` separates header fields."""
    return text.translate(_HEADER)


def escape_cell(text: str) -> str:
    """A `str` cell: `,` separates cells, `|` header fields; a leading `"` is escaped
    because a cell starting with a bare quote is the empty string `""`."""
    escaped = text.translate(_CELL)
    return "\\" + escaped if escaped.startswith('"') else escaped


def escape_name(text: str) -> str:
    """A key or column name: also `:` (before a type) and `=` (before a value)."""
    return text.translate(_NAME)


def json_text(value: Any, *, header: bool = False) -> str:
    """Compact JSON that survives UTF-8 and line splitting; in a header, without `|`.

    The characters replaced can only occur inside JSON strings, where `\\uXXXX` is valid.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    pattern = _JSON_UNSAFE_HEADER if header else _JSON_UNSAFE
    return pattern.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
