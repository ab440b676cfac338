"""`decode`: a QRP1 document back to exactly the JSON value that was encoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import QRPDecodeError
from .header import Header, parse_header
from .scan import LineScanner
from .shapes import DECODERS

__all__ = ["QRPDocument", "decode", "parse"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "record": (dict, int, float, bool, type(None)),
    "table": (list,),
    "series": (list,),
    "text": (str,),
    "receipt": (dict,),
}


@dataclass(frozen=True, slots=True)
class QRPDocument:
    """A decoded document: its header (source, snapshot, paging, columns…) and its value."""

    header: Header
    value: Any


def _check_no_raw_cr(text: str, start: int) -> None:
    # Writers escape every CR outside a text body; a raw one means the line breaks were
    # rewritten (CRLF) somewhere on the way, which would silently change values.
    where = text.find("\r", start)
    if where >= 0:
        line = text.count("\n", 0, where) + 1
        column = where - (text.rfind("\n", 0, where) + 1) + 1
        raise QRPDecodeError(
            "raw carriage return: QRP1 lines end with LF only (was it converted to CRLF?)",
            line=line,
            column=column,
        )


def parse(text: str) -> QRPDocument:
    """Parse a document. Raises `QRPDecodeError` naming the line and column of a fault."""
    if not isinstance(text, str):
        raise TypeError(f"decode takes str, got {type(text).__name__}")
    newline = text.find("\n")
    header_line = text if newline < 0 else text[:newline]
    if "\r" in header_line:
        _check_no_raw_cr(header_line, 0)
    header = parse_header(header_line)
    if header.kind != "text" and newline >= 0:
        _check_no_raw_cr(text, newline)
    lines = [] if newline < 0 else text[newline + 1 :].split("\n")
    if header.body == "json":
        value, used = _decode_json_body(header, lines)
    else:
        value, used = DECODERS[header.kind](header, lines, 2)
    rest = lines[used:]
    if rest and rest != [""]:
        raise QRPDecodeError(
            "unexpected line after the body (the header's counts say the body ended)",
            line=2 + used,
            column=1,
        )
    return QRPDocument(header, value)


def decode(text: str) -> Any:
    """The JSON value a QRP1 document holds; `decode(encode(x)) == x`."""
    return parse(text).value


def _decode_json_body(header: Header, lines: list[str]) -> tuple[Any, int]:
    if not lines:
        raise QRPDecodeError("body=json needs a JSON line after the header", line=2, column=1)
    scanner = LineScanner(lines[0], 2)
    value = scanner.read_json()
    if not scanner.at_end():
        raise scanner.error("unexpected text after the JSON body")
    expected = _JSON_TYPES[header.kind]
    if not isinstance(value, expected) or (header.kind == "record" and isinstance(value, str)):
        raise QRPDecodeError(
            f"a {header.kind} cannot hold a JSON {type(value).__name__}", line=2, column=1
        )
    return value, 1
