"""References: a tool hands data to another tool as `ref:<id>` instead of the data itself.

A reference names one stored snapshot — a frozen copy, never the live source — and
carries its owner, kind, creation time and expiry. Every read checks them all, and a
refusal is a `ToolError` whose `kind` is a stable code the model reads:

- `reference_invalid`   — not a reference at all (`ref:` then 1-64 of A-Z a-z 0-9 . _ -);
- `reference_not_found` — no such reference (never made, or purged after it expired);
- `reference_forbidden` — it belongs to another owner;
- `reference_expired`   — past its expiry, or its snapshot is gone: the data is not read
  again from the source behind the caller's back;
- `reference_mismatch`  — the wrong kind for this tool, or a snapshot that changed.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import ToolError
from ..messages import ToolErrorKind, hint_for
from .storage import Clock, DataStore, SnapshotRecord, utc_now

__all__ = [
    "DEFAULT_REFERENCE_TTL_S",
    "MAX_REFERENCE_LENGTH",
    "REFERENCE_EXPIRED",
    "REFERENCE_FORBIDDEN",
    "REFERENCE_INVALID",
    "REFERENCE_MISMATCH",
    "REFERENCE_NOT_FOUND",
    "REF_PREFIX",
    "Reference",
    "References",
    "Resolved",
    "format_reference",
    "is_reference",
    "parse_reference",
    "reference_error",
]

REFERENCE_INVALID = ToolErrorKind.REFERENCE_INVALID
REFERENCE_NOT_FOUND = ToolErrorKind.REFERENCE_NOT_FOUND
REFERENCE_FORBIDDEN = ToolErrorKind.REFERENCE_FORBIDDEN
REFERENCE_EXPIRED = ToolErrorKind.REFERENCE_EXPIRED
REFERENCE_MISMATCH = ToolErrorKind.REFERENCE_MISMATCH

REF_PREFIX = "ref:"
_MAX_ID = 64
_ID = re.compile(rf"[A-Za-z0-9._-]{{1,{_MAX_ID}}}")
MAX_REFERENCE_LENGTH = len(REF_PREFIX) + _MAX_ID
DEFAULT_REFERENCE_TTL_S = 3600.0


def reference_error(kind: ToolErrorKind, message: str) -> ToolError:
    """The error a model reads for a refused reference: `{kind, message, hint}`."""
    return ToolError(message, kind=kind, hint=hint_for(kind))


def format_reference(ref_id: str) -> str:
    """`ref:<id>`, the form tools return and take."""
    if not _ID.fullmatch(ref_id):
        raise ValueError(f"reference id {ref_id!r} must be 1-{_MAX_ID} of A-Z a-z 0-9 . _ -")
    return REF_PREFIX + ref_id


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(REF_PREFIX)


def parse_reference(text: Any) -> str:
    """The store id in `ref:<id>`; anything else is `reference_invalid`."""
    if not isinstance(text, str) or not text.startswith(REF_PREFIX):
        shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
        raise reference_error(
            REFERENCE_INVALID, f"{shown} is not a reference (references look like ref:<id>)"
        )
    ref_id = text[len(REF_PREFIX) :]
    if not _ID.fullmatch(ref_id):
        raise reference_error(
            REFERENCE_INVALID,
            f"malformed reference: after 'ref:' come 1-{_MAX_ID} of A-Z a-z 0-9 . _ -",
        )
    return ref_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """A handle on one snapshot. `token` (`ref:<id>`) is what tools return and take.

    Attributes:
        kind: what the data is (`klines`, `crossovers`…): a tool states the kinds it takes.
        snapshot: the id of the frozen data; `version` the source version it was read at.
        meta: the application's notes on it.
    """

    id: str
    owner: str
    kind: str
    snapshot: str
    source: str
    version: str | None
    created_at: datetime
    expires_at: datetime | None
    meta: dict[str, Any]

    @property
    def token(self) -> str:
        return REF_PREFIX + self.id

    def __str__(self) -> str:
        return self.token


@dataclass(frozen=True, slots=True)
class Resolved:
    """A reference that passed every check, and the snapshot it names."""

    reference: Reference
    snapshot: SnapshotRecord


class References:
    """Creates and resolves references for one owner.

    Args:
        store: where snapshots and references live.
        owner: whose references these are (a user, a tenant, a session): every resolve
            refuses another owner's.
        clock: expiry is checked against it.
        ttl_s: how long a new reference lives unless told otherwise.
    """

    def __init__(
        self,
        store: DataStore,
        *,
        owner: str,
        clock: Clock = utc_now,
        ttl_s: float = DEFAULT_REFERENCE_TTL_S,
    ) -> None:
        if not isinstance(owner, str) or not owner:
            raise ValueError("a data plane needs an owner (a non-empty string)")
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s!r}")
        self.store = store
        self.owner = owner
        self.clock = clock
        self.ttl_s = ttl_s

    def create(
        self,
        snapshot: SnapshotRecord,
        *,
        kind: str,
        ttl_s: float | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Reference:
        """A new reference to `snapshot` (which must be this owner's). It expires after
        `ttl_s`, and never after its snapshot does."""
        if snapshot.owner != self.owner:
            raise reference_error(
                REFERENCE_FORBIDDEN, f"snapshot {snapshot.id} belongs to another owner"
            )
        ttl = self.ttl_s if ttl_s is None else ttl_s
        if not ttl > 0:
            raise ValueError(f"ttl_s must be positive, got {ttl!r}")
        expires = self.clock() + timedelta(seconds=ttl)
        if snapshot.expires_at is not None:
            expires = min(expires, snapshot.expires_at)
        # What the reference was made for, kept beside it: a snapshot that no longer
        # matches is refused rather than read.
        stored = {"digest": snapshot.digest, "version": snapshot.version, "data": meta or {}}
        row = self.store.create_reference(
            owner=self.owner, snapshot_id=snapshot.id, kind=kind, meta=stored, expires_at=expires
        )
        return _reference(
            row.id, row.owner, row.kind, snapshot, row.created_at, row.expires_at, stored
        )

    def resolve(self, token: Any, *, kind: str | Collection[str] | None = None) -> Resolved:
        """Check `token` (owner, expiry, snapshot, kind) and return what it names.

        Raises:
            ToolError: `reference_invalid`, `reference_not_found`, `reference_forbidden`,
                `reference_expired` or `reference_mismatch` (see the module doc).
        """
        ref_id = parse_reference(token)
        row = self.store.get_reference(ref_id)
        if row is None:
            raise reference_error(REFERENCE_NOT_FOUND, f"no reference {token}")
        if row.owner != self.owner:
            raise reference_error(REFERENCE_FORBIDDEN, f"reference {token} is not yours")
        now = self.clock()
        if row.expires_at is not None and now >= row.expires_at:
            raise reference_error(
                REFERENCE_EXPIRED, f"reference {token} expired at {_iso(row.expires_at)}"
            )
        snapshot = self.store.get_snapshot(row.snapshot_id)
        if snapshot is None or (snapshot.expires_at is not None and now >= snapshot.expires_at):
            raise reference_error(
                REFERENCE_EXPIRED, f"the data of reference {token} is no longer kept"
            )
        if snapshot.owner != row.owner:
            raise reference_error(REFERENCE_FORBIDDEN, f"reference {token} is not yours")
        stored = row.meta or {}
        if stored.get("digest") != snapshot.digest or stored.get("version") != snapshot.version:
            raise reference_error(
                REFERENCE_MISMATCH,
                f"the data behind {token} is not the version it was made for",
            )
        wanted = {kind} if isinstance(kind, str) else set(kind or ())
        if wanted and row.kind not in wanted:
            raise reference_error(
                REFERENCE_MISMATCH,
                f"{token} holds {row.kind!r} data; this takes {' or '.join(sorted(wanted))}",
            )
        reference = _reference(
            row.id, row.owner, row.kind, snapshot, row.created_at, row.expires_at, stored
        )
        return Resolved(reference, snapshot)


def _reference(
    ref_id: str,
    owner: str,
    kind: str,
    snapshot: SnapshotRecord,
    created_at: datetime,
    expires_at: datetime | None,
    stored: dict[str, Any] | None = None,
) -> Reference:
    data = (stored or {}).get("data")
    return Reference(
        id=ref_id,
        owner=owner,
        kind=kind,
        snapshot=snapshot.id,
        source=snapshot.source,
        version=snapshot.version,
        created_at=created_at,
        expires_at=expires_at,
        meta=dict(data) if isinstance(data, dict) else {},
    )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
