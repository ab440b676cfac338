"""The data plane: what the model reads is compact (QRP1) and paged; bulk data stays out."""

from __future__ import annotations

from .qrp1 import (
    Header,
    PageInfo,
    QRPDecodeError,
    QRPDocument,
    QRPEncodeError,
    QRPError,
    decode,
    encode,
    parse,
)

__all__ = [
    "Header",
    "PageInfo",
    "QRPDecodeError",
    "QRPDocument",
    "QRPEncodeError",
    "QRPError",
    "decode",
    "encode",
    "parse",
]
