"""`DataStore`: the storage the data plane needs — snapshots in pages, references, a key.

The durable store (`pi_runtime.durable.Store`, SQLite or PostgreSQL) satisfies it as it
is; `MemoryDataStore` does for examples and tests without a database. The records are
defined here, below both, and the durable layer returns these same classes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, Unpack, runtime_checkable

if TYPE_CHECKING:
    from .fields import NewReference, NewSnapshot

__all__ = [
    "Clock",
    "DataStore",
    "PageRecord",
    "ReferenceRecord",
    "SnapshotRecord",
    "TaskState",
    "pages_digest",
    "utc_now",
]

Clock = Callable[[], datetime]
"""Where the data plane reads the time (aware UTC); tests pass a clock they move."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRecord:
    """A frozen copy of data stored in pages: what a reference or a cursor points at.

    `locator` is the query that produced it, `version` the source's version it was read
    at, `digest` a hash of every page (so a changed snapshot cannot pass for the old one).
    """

    id: str
    owner: str
    source: str
    locator: dict[str, Any] | None
    version: str | None
    digest: str
    page_count: int
    row_count: int | None
    meta: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRecord:
    """One stored page (0-based `seq`) of a snapshot."""

    snapshot_id: str
    seq: int
    body: str
    row_count: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceRecord:
    """A stored reference: a handle on one snapshot, readable by its owner only."""

    id: str
    owner: str
    snapshot_id: str
    kind: str
    meta: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime | None


def pages_digest(pages: Sequence[str]) -> str:
    """sha256 over the pages, each length-prefixed (so page boundaries count)."""
    digest = hashlib.sha256()
    for body in pages:
        data = body.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


@runtime_checkable
class DataStore(Protocol):
    """The operations the data plane uses; each is one transaction."""

    def put_snapshot(self, **fields: Unpack[NewSnapshot]) -> SnapshotRecord:
        """Store `pages` whole as a new snapshot under a new id (`fields.new_snapshot`
        checks the fields and builds the records)."""
        ...

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord | None: ...

    def get_page(self, snapshot_id: str, seq: int) -> PageRecord | None: ...

    def create_reference(self, **fields: Unpack[NewReference]) -> ReferenceRecord:
        """A new reference under a new id to an existing snapshot (`fields.new_reference`
        checks the fields and builds the record)."""
        ...

    def get_reference(self, ref_id: str) -> ReferenceRecord | None: ...

    def signing_key(self, name: str) -> str:
        """A secret every process sharing the store sees alike, made on first use."""
        ...


class TaskState(Protocol):
    """What the data plane reads of a background task (a durable job fits): its status
    (`failed`, `cancelled`, `outcome_unknown` are terminal failures) and error object
    (`{kind, message, hint}`)."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> Mapping[str, Any] | None: ...
