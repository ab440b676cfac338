"""The data plane: what the model reads is compact (QRP1) and paged; bulk data stays out.

Tools hand data to each other by reference (`ref:<id>`, owner- and snapshot-bound); what
the model must read comes in byte-limited QRP1 pages with HMAC-signed cursors."""

from __future__ import annotations

from ..qrp1 import (
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
from .answers import read_result_tool, spill_to
from .cursor import CursorSigner
from .memory import MemoryDataStore
from .pages import Page, Pager
from .plane import DataPlane, Published
from .refs import Reference, References, Resolved
from .storage import DataStore

__all__ = [
    "CursorSigner",
    "DataPlane",
    "DataStore",
    "Header",
    "MemoryDataStore",
    "Page",
    "PageInfo",
    "Pager",
    "Published",
    "QRPDecodeError",
    "QRPDocument",
    "QRPEncodeError",
    "QRPError",
    "Reference",
    "References",
    "Resolved",
    "decode",
    "encode",
    "parse",
    "read_result_tool",
    "spill_to",
]
