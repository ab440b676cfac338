"""`receipt`: a short outcome of an action on one line: `key=value,key=value`."""

from __future__ import annotations

from typing import Any

from ..cells import read_cell, write_cell
from ..errors import QRPDecodeError, QRPEncodeError
from ..escape import escape_name
from ..header import Header
from ..scan import LineScanner
from .base import Body, EncodeOptions

__all__ = ["decode_receipt", "encode_receipt"]


def encode_receipt(value: Any, options: EncodeOptions) -> Body | None:
    if not isinstance(value, dict):
        raise QRPEncodeError(f"kind receipt takes an object, got {type(value).__name__}")
    line = ",".join(f"{escape_name(k)}={write_cell(v, 'any', ',')}" for k, v in value.items())
    return Body({}, [line])


def decode_receipt(header: Header, lines: list[str], first_lineno: int) -> tuple[Any, int]:
    if not lines:
        raise QRPDecodeError(
            "a receipt needs its line after the header", line=first_lineno, column=1
        )
    scanner = LineScanner(lines[0], first_lineno)
    receipt: dict[str, Any] = {}
    while not scanner.at_end():
        if receipt:
            scanner.expect(",", "',' between receipt fields")
        start = scanner.pos
        key = scanner.read_text("=,")
        scanner.expect("=", "'=' after the field name")
        if key in receipt:
            raise scanner.error(f"duplicate field {key!r}", start)
        receipt[key] = read_cell(scanner, "any", ",")
    return receipt, 1
