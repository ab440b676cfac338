"""`MemoryDataStore`: the data plane's storage in one process's memory.

For examples and tests without a database. Same behaviour as the durable store's data
plane (new ids, whole snapshots, one key per name), gone when the process ends.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..exceptions import UserError
from .storage import (
    Clock,
    PageRecord,
    ReferenceRecord,
    SnapshotRecord,
    pages_digest,
    utc_now,
)

__all__ = ["MemoryDataStore"]


def _check_name(what: str, value: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 200 or not value.isprintable():
        raise UserError(f"{what} must be a printable, non-empty string of at most 200 characters")


class MemoryDataStore:
    """A `DataStore` in memory; thread-safe (sync tools run in worker threads).

    Args:
        clock: where `created_at` comes from (the data plane checks expiry with its own).
    """

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, SnapshotRecord] = {}
        self._pages: dict[tuple[str, int], PageRecord] = {}
        self._refs: dict[str, ReferenceRecord] = {}
        self._keys: dict[str, str] = {}

    def put_snapshot(
        self,
        *,
        owner: str,
        source: str,
        pages: Sequence[str],
        page_rows: Sequence[int] | None = None,
        locator: dict[str, Any] | None = None,
        version: str | None = None,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> SnapshotRecord:
        _check_name("owner", owner)
        _check_name("source", source)
        if any(not isinstance(body, str) for body in pages):
            raise UserError("snapshot pages must be strings")
        if page_rows is not None and len(page_rows) != len(pages):
            raise UserError(f"page_rows has {len(page_rows)} counts for {len(pages)} pages")
        snapshot = SnapshotRecord(
            id=f"snap-{uuid.uuid4().hex[:16]}",
            owner=owner,
            source=source,
            locator=locator,
            version=version,
            digest=pages_digest(pages),
            page_count=len(pages),
            row_count=None if page_rows is None else sum(page_rows),
            meta=meta,
            created_at=self._clock(),
            expires_at=expires_at,
        )
        with self._lock:
            self._snapshots[snapshot.id] = snapshot
            for seq, body in enumerate(pages):
                rows = None if page_rows is None else page_rows[seq]
                self._pages[snapshot.id, seq] = PageRecord(
                    snapshot_id=snapshot.id, seq=seq, body=body, row_count=rows
                )
        return snapshot

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        with self._lock:
            return self._snapshots.get(snapshot_id)

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None:
        with self._lock:
            return self._pages.get((snapshot_id, seq))

    def create_reference(
        self,
        *,
        owner: str,
        snapshot_id: str,
        kind: str,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> ReferenceRecord:
        _check_name("owner", owner)
        _check_name("reference kind", kind)
        reference = ReferenceRecord(
            id=f"ref-{uuid.uuid4().hex[:16]}",
            owner=owner,
            snapshot_id=snapshot_id,
            kind=kind,
            meta=meta,
            created_at=self._clock(),
            expires_at=expires_at,
        )
        with self._lock:
            if snapshot_id not in self._snapshots:
                raise LookupError(f"no snapshot {snapshot_id!r}")
            self._refs[reference.id] = reference
        return reference

    def get_reference(self, ref_id: str) -> ReferenceRecord | None:
        with self._lock:
            return self._refs.get(ref_id)

    def purge_expired(self) -> int:
        """Delete references and snapshots past their expiry; return how many went (the
        references of an expired snapshot go with it, uncounted, as in the durable store)."""
        now = self._clock()
        with self._lock:
            refs = [r.id for r in self._refs.values() if r.expires_at and r.expires_at < now]
            snaps = {s.id for s in self._snapshots.values() if s.expires_at and s.expires_at < now}
            for ref_id in refs:
                del self._refs[ref_id]
            for ref_id in [r.id for r in self._refs.values() if r.snapshot_id in snaps]:
                del self._refs[ref_id]
            for key in [k for k in self._pages if k[0] in snaps]:
                del self._pages[key]
            for snapshot_id in snaps:
                del self._snapshots[snapshot_id]
        return len(refs) + len(snaps)

    def signing_key(self, name: str) -> str:
        _check_name("key name", name)
        with self._lock:
            return self._keys.setdefault(name, secrets.token_hex(32))
