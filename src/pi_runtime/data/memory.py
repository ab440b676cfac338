"""`MemoryDataStore`: the data plane's storage in one process's memory.

For examples and tests without a database. Same behaviour as the durable store's data
plane (new ids, whole snapshots, one key per name), gone when the process ends.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from typing import Unpack

from .fields import NewReference, NewSnapshot, check_name, new_reference, new_snapshot
from .storage import Clock, PageRecord, ReferenceRecord, SnapshotRecord, utc_now

__all__ = ["MemoryDataStore"]


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

    def put_snapshot(self, **fields: Unpack[NewSnapshot]) -> SnapshotRecord:
        snapshot_id = f"snap-{uuid.uuid4().hex[:16]}"
        snapshot, pages = new_snapshot(fields, id=snapshot_id, created_at=self._clock())
        with self._lock:
            self._snapshots[snapshot.id] = snapshot
            self._pages.update({(snapshot.id, page.seq): page for page in pages})
        return snapshot

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        with self._lock:
            return self._snapshots.get(snapshot_id)

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None:
        with self._lock:
            return self._pages.get((snapshot_id, seq))

    def create_reference(self, **fields: Unpack[NewReference]) -> ReferenceRecord:
        ref_id = f"ref-{uuid.uuid4().hex[:16]}"
        reference = new_reference(fields, id=ref_id, created_at=self._clock())
        with self._lock:
            if reference.snapshot_id not in self._snapshots:
                raise LookupError(f"no snapshot {reference.snapshot_id!r}")
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
        check_name("key name", name)
        with self._lock:
            return self._keys.setdefault(name, secrets.token_hex(32))
