"""`DataStore`: the storage the data plane needs — snapshots in pages, references, a key.

The durable store (`pi_runtime.durable.Store`, SQLite or PostgreSQL) satisfies it as it
is; `MemoryDataStore` does for examples and tests without a database. The records are
read-only views: the durable layer's frozen dataclasses fit them structurally, so this
layer never imports the one above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Clock",
    "DataStore",
    "PageRow",
    "ReferenceRow",
    "SnapshotRow",
    "TaskState",
    "utc_now",
]

Clock = Callable[[], datetime]
"""Where the data plane reads the time (aware UTC); tests pass a clock they move."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class SnapshotRow(Protocol):
    """A frozen copy of data stored in pages: what a reference or a cursor points at.

    `locator` is the query that produced it, `version` the source's version it was read
    at, `digest` a hash of every page (so a changed snapshot cannot pass for the old one).
    """

    @property
    def id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def locator(self) -> dict[str, Any] | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def digest(self) -> str: ...
    @property
    def page_count(self) -> int: ...
    @property
    def row_count(self) -> int | None: ...
    @property
    def meta(self) -> dict[str, Any] | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime | None: ...


class PageRow(Protocol):
    """One stored page (0-based `seq`) of a snapshot."""

    @property
    def snapshot_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def body(self) -> str: ...
    @property
    def row_count(self) -> int | None: ...


class ReferenceRow(Protocol):
    """A stored reference: a handle on one snapshot, readable by its owner only."""

    @property
    def id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def snapshot_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any] | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime | None: ...


@runtime_checkable
class DataStore(Protocol):
    """The operations the data plane uses; each is one transaction."""

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
    ) -> SnapshotRow:
        """Store `pages` whole as a new snapshot under a new id."""
        ...

    def get_snapshot(self, snapshot_id: str) -> SnapshotRow | None: ...

    def get_page(self, snapshot_id: str, seq: int) -> PageRow | None: ...

    def create_reference(
        self,
        *,
        owner: str,
        snapshot_id: str,
        kind: str,
        meta: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> ReferenceRow:
        """A new reference under a new id to an existing snapshot."""
        ...

    def get_reference(self, ref_id: str) -> ReferenceRow | None: ...

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
