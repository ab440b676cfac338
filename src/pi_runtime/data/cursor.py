"""Page cursors: opaque, signed (HMAC-SHA256), bound to one snapshot and its query.

Wire format (version 1)::

    c1.<base64url, unpadded, canonical>
       = snapshot id length (1 byte) · snapshot id (ASCII) · page seq (u32, 0-based)
         · expires (u32, epoch seconds) · binding (8 bytes) · tag (16 bytes)

`binding` is sha256 over the query, sort, result version and snapshot digest the cursor
was issued for; `tag` is HMAC-SHA256 under the store's shared key over everything before
it. Any change to any character fails the tag (or the format): `cursor_invalid`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ToolError
from ..messages import ToolErrorKind, hint_for
from ..messages.canonical import canonical_json

__all__ = [
    "CURSOR_EXPIRED",
    "CURSOR_FORBIDDEN",
    "CURSOR_INVALID",
    "CURSOR_MISMATCH",
    "CURSOR_PREFIX",
    "KEY_NAME",
    "MAX_CURSOR_LENGTH",
    "MAX_SNAPSHOT_ID",
    "CursorClaims",
    "CursorSigner",
    "binding",
    "cursor_error",
]

# Stable error kinds the model reads (wire names: never renamed).
CURSOR_INVALID = ToolErrorKind.CURSOR_INVALID
CURSOR_EXPIRED = ToolErrorKind.CURSOR_EXPIRED
CURSOR_MISMATCH = ToolErrorKind.CURSOR_MISMATCH
CURSOR_FORBIDDEN = ToolErrorKind.CURSOR_FORBIDDEN

CURSOR_PREFIX = "c1."
KEY_NAME = "data-cursor-v1"
MAX_SNAPSHOT_ID = 64
_BIND_BYTES = 8
_TAG_BYTES = 16
_TAIL = struct.Struct(">II")  # seq, expires
_DOMAIN = b"pi-cursor-v1\x00"  # keeps this key's tags apart from any other use of it
_SNAPSHOT_ID = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_SNAPSHOT_ID}}}")
_BODY = re.compile(r"[A-Za-z0-9_-]+")


def cursor_error(kind: ToolErrorKind, message: str) -> ToolError:
    """The error a model reads for a refused cursor: `{kind, message, hint}`."""
    return ToolError(message, kind=kind, hint=hint_for(kind))


@dataclass(frozen=True, slots=True, kw_only=True)
class CursorClaims:
    """What a cursor says: page `seq` (0-based) of `snapshot`, valid until `expires`
    (epoch seconds), for the query, sort and version whose `binding` it carries."""

    snapshot: str
    seq: int
    expires: int
    binding: bytes


def binding(
    *, query: Mapping[str, Any] | None, sort: str | None, version: str | None, digest: str
) -> bytes:
    """What a cursor is bound to, hashed: the query (spelling-free: key order, `1.0` vs
    `1`), the sort, the result version and the snapshot's content digest."""
    text = canonical_json({"query": query, "sort": sort, "version": version, "digest": digest})
    # Stores keep these repaired; a lone surrogate handed in directly still hashes.
    return hashlib.sha256(text.encode(errors="surrogatepass")).digest()[:_BIND_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class CursorSigner:
    """Signs and verifies cursors under one key (the store's `signing_key(KEY_NAME)`, so
    every worker sharing the store reads every other's cursors)."""

    def __init__(self, key: str | bytes) -> None:
        if isinstance(key, str):
            try:
                raw = bytes.fromhex(key)
            except ValueError:
                raw = key.encode()
        else:
            raw = key
        if len(raw) < 16:
            raise ValueError("a cursor key needs at least 16 bytes")
        self._key = raw

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload, hashlib.sha256).digest()[:_TAG_BYTES]

    def sign(self, claims: CursorClaims) -> str:
        if not _SNAPSHOT_ID.fullmatch(claims.snapshot):
            raise ValueError(
                f"snapshot id {claims.snapshot!r} cannot go in a cursor "
                f"(1-{MAX_SNAPSHOT_ID} of A-Z a-z 0-9 . _ -)"
            )
        if len(claims.binding) != _BIND_BYTES:
            raise ValueError(f"a cursor binding is {_BIND_BYTES} bytes")
        snapshot = claims.snapshot.encode()
        payload = (
            bytes([len(snapshot)])
            + snapshot
            + _TAIL.pack(claims.seq, claims.expires)
            + claims.binding
        )
        return CURSOR_PREFIX + _b64(payload + self._tag(payload))

    def verify(self, text: str) -> CursorClaims:
        """The claims of an untampered cursor; anything else is `cursor_invalid`."""
        if not isinstance(text, str) or not text.startswith(CURSOR_PREFIX):
            raise cursor_error(
                CURSOR_INVALID, f"not a page cursor (cursors start with {CURSOR_PREFIX!r})"
            )
        body = text[len(CURSOR_PREFIX) :]
        data = _strict_b64(body)
        if data is None or len(data) < 1 + _TAIL.size + _BIND_BYTES + _TAG_BYTES:
            raise cursor_error(CURSOR_INVALID, "the cursor is malformed (cut short or altered)")
        payload, tag = data[:-_TAG_BYTES], data[-_TAG_BYTES:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise cursor_error(CURSOR_INVALID, "the cursor's signature does not match (altered)")
        size = payload[0]
        # A valid tag means we wrote this layout; a mismatch is a bug, not an attack.
        if len(payload) != 1 + size + _TAIL.size + _BIND_BYTES:
            raise cursor_error(CURSOR_INVALID, "the cursor's layout is unknown")
        snapshot = payload[1 : 1 + size].decode("ascii")
        seq, expires = _TAIL.unpack_from(payload, 1 + size)
        return CursorClaims(
            snapshot=snapshot, seq=seq, expires=expires, binding=payload[-_BIND_BYTES:]
        )


def _strict_b64(body: str) -> bytes | None:
    """Decoded bytes, or None unless `body` is the one canonical spelling of them (so no
    two strings read as the same cursor: spare bits and stray characters are refused)."""
    if not _BODY.fullmatch(body) or len(body) % 4 == 1:
        return None
    try:
        data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    return data if _b64(data) == body else None


MAX_CURSOR_LENGTH = len(
    CursorSigner(b"\x00" * 16).sign(
        CursorClaims(snapshot="s" * MAX_SNAPSHOT_ID, seq=0, expires=0, binding=b"\x00" * 8)
    )
)
"""The longest cursor (a 64-character snapshot id): what a page reserves for `next`."""
