"""QRP1: a versioned text format for the results a model reads (docs/qrp1.md).

One `QRP1|kind|key=value…` header line says what the body is and where it came from;
the body is shaped for the data: `record`, `table`, `series`, `text` or `receipt`.
`decode(encode(x)) == x` for every JSON value the kind takes.
"""

from __future__ import annotations

from .columns import Column
from .decode import QRPDocument, decode, parse
from .encode import choose_kind, encode
from .errors import QRPDecodeError, QRPEncodeError, QRPError
from .header import KINDS, MAGIC, Header, Kind, PageInfo

__all__ = [
    "KINDS",
    "MAGIC",
    "Column",
    "Header",
    "Kind",
    "PageInfo",
    "QRPDecodeError",
    "QRPDocument",
    "QRPEncodeError",
    "QRPError",
    "choose_kind",
    "decode",
    "encode",
    "parse",
]
