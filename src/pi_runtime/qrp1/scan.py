"""Reading one line of a QRP1 document left to right, with errors that say where."""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, NoReturn

from .errors import QRPDecodeError

__all__ = ["LineScanner"]

_SIMPLE_ESCAPES = {
    "\\": "\\",
    "n": "\n",
    "r": "\r",
    ",": ",",
    "|": "|",
    ":": ":",
    "=": "=",
    '"': '"',
}
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    # JSON has no infinities: `1e400` would read as one.
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text!r} is out of the float range")
    return number


_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


@functools.cache
def _stop_pattern(stops: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape("\\" + stops) + "]")


class LineScanner:
    """A cursor over one line; `line` is the 1-based line number used in errors."""

    __slots__ = ("line", "pos", "text")

    def __init__(self, text: str, line: int, pos: int = 0) -> None:
        self.text = text
        self.line = line
        self.pos = pos

    def error(self, message: str, pos: int | None = None) -> QRPDecodeError:
        column = (self.pos if pos is None else pos) + 1
        return QRPDecodeError(message, line=self.line, column=column)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "end of line"
            raise self.error(f"expected {what}, found {found}")
        self.pos += 1

    def read_raw(self, stops: str) -> str:
        """Characters up to the next stop character or the end; escapes not allowed."""
        match = _stop_pattern(stops).search(self.text, self.pos)
        end = len(self.text) if match is None else match.start()
        if match is not None and match.group() == "\\":
            raise self.error(
                "a backslash escape is not allowed here (quote the value as JSON)", end
            )
        start, self.pos = self.pos, end
        return self.text[start:end]

    def read_text(self, stops: str) -> str:
        """Escaped text up to the next unescaped stop character or the end, unescaped."""
        pattern = _stop_pattern(stops)
        parts: list[str] = []
        while True:
            match = pattern.search(self.text, self.pos)
            if match is None:
                parts.append(self.text[self.pos :])
                self.pos = len(self.text)
                return "".join(parts)
            parts.append(self.text[self.pos : match.start()])
            self.pos = match.start()
            if match.group() != "\\":
                return "".join(parts)
            parts.append(self._unescape())

    def _unescape(self) -> str:
        start = self.pos
        code = self.text[start + 1 : start + 2]
        if code == "u":
            digits = self.text[start + 2 : start + 6]
            if not _HEX4.fullmatch(digits):
                raise self.error("\\u must be followed by 4 hex digits", start)
            self.pos = start + 6
            return chr(int(digits, 16))
        if code in _SIMPLE_ESCAPES and code:
            self.pos = start + 2
            return _SIMPLE_ESCAPES[code]
        found = repr(code) if code else "end of line"
        raise self.error(f"unknown escape: backslash followed by {found}", start)

    def read_json(self) -> Any:
        """One compact JSON value starting here (strings, arrays, objects, literals)."""
        try:
            value, end = _JSON.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.error(f"invalid JSON: {exc.msg}", exc.pos) from None
        except ValueError as exc:  # e.g. NaN, 1e400, or an integer past Python's digit limit
            raise self.error(f"invalid JSON: {exc}") from None
        except RecursionError:
            raise self.error("invalid JSON: nested too deeply to read") from None
        self.pos = end
        return value
