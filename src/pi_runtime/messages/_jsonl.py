"""JSON Lines that hold any text: one JSON object a line, lines split on "\\n" alone.

Pi's traces are JSONL, written by `observe` and read back by `observe` and by the replay
model, so the line format lives down here where both can reach it.

`str.splitlines` also breaks lines at U+2028, U+2029, U+0085, \\x0b, \\x0c and \\x1c-\\x1e.
`json.dumps` escapes the ASCII ones (every character below 0x20) but writes the other
three raw when `ensure_ascii` is off, so a message holding one would break its line for
any reader that splits lines the way Python, editors or JavaScript do. `json_line`
escapes them, and `read_json_lines` splits on "\\n" only, so traces written before
still read.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..userfiles import open_user_file
from ._text import repair_value

# What json.dumps leaves raw that a line splitter would still break on.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def json_line(value: Any) -> str:
    """`value` as one line of compact JSON, without the newline.

    Lone surrogates are repaired first (no encoder can write them), and no character is
    left that any line splitter breaks on, so the line reads back as one line anywhere.
    """
    text = json.dumps(repair_value(value), ensure_ascii=False, separators=(",", ":"))
    return escape_line_breaks(text)


def escape_line_breaks(json_text: str) -> str:
    """`json_text` (any JSON) with U+0085, U+2028 and U+2029 escaped: the same JSON, on one
    line for every line splitter (a server-sent event's `data:` line too)."""
    # These characters only occur inside JSON strings, where their escape means the same.
    return json_text.translate(_LINE_BREAKS)


def read_json_lines(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a JSONL file in order, blank lines skipped, strings repaired.

    The file is read a line at a time (a binary file's lines end at "\\n" alone); it must
    be a regular file, so a FIFO or a device never blocks or fills memory.

    Raises:
        OSError: the file cannot be read or is not a regular file (then a `UserFileError`).
        ValueError: a line is not UTF-8 or not a JSON object; the message names the file
            and the line.
    """
    with open_user_file(path, what="trace") as file:
        return _objects(path, file)


def _objects(path: str | Path, lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """The objects of the JSONL `lines` of the file at `path`, as `read_json_lines` says."""
    objects: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if number == 1:
            line = line.removeprefix(codecs.BOM_UTF8)
        if not line.strip():
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: line {number} is not UTF-8: {exc.reason}") from exc
        except RecursionError as exc:
            raise ValueError(f"{path}: line {number} is nested too deeply to read") from exc
        except ValueError as exc:
            raise ValueError(f"{path}: line {number} is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValueError(
                f"{path}: line {number} is not a JSON object but {type(value).__name__}"
            )
        objects.append(repair_value(value))
    return objects
