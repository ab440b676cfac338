"""The five QRP1 shapes, each an encoder to header keys + lines and a decoder back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..header import Header
from .base import Body, EncodeOptions
from .receipt import decode_receipt, encode_receipt
from .record import decode_record, encode_record
from .series import decode_series, encode_series, is_regular_series
from .table import decode_table, encode_table
from .text import decode_text, encode_text

__all__ = ["DECODERS", "ENCODERS", "Body", "EncodeOptions", "is_regular_series"]

Encoder = Callable[[Any, EncodeOptions], Body | None]
Decoder = Callable[[Header, list[str], int], tuple[Any, int]]

ENCODERS: dict[str, Encoder] = {
    "record": encode_record,
    "table": encode_table,
    "series": encode_series,
    "text": encode_text,
    "receipt": encode_receipt,
}
DECODERS: dict[str, Decoder] = {
    "record": decode_record,
    "table": decode_table,
    "series": decode_series,
    "text": decode_text,
    "receipt": decode_receipt,
}
