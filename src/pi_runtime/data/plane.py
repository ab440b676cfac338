"""`DataPlane`: references, pages and cursors together, for one owner over one store.

plane = DataPlane(store, owner="alice")             # store: durable Store or memory
result = plane.publish(rows, kind_of="crossovers", source="compute:ma_cross",
                       query={"symbol": "BNBUSDT", "fast": 20, "slow": 50})
return result.first.text          # page 1 (QRP1) with x-ref and next=<cursor>
...
plane.read(cursor, reference="ref:…")   # a later page, bound to the same snapshot
plane.rows("ref:…", kind="klines")      # a tool reading referenced data itself
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..qrp1 import Kind
from .pages import DEFAULT_PAGE_BYTES, DEFAULT_RETENTION_S, Page, Pager, check_task
from .refs import Reference, References, Resolved
from .storage import Clock, DataStore, SnapshotRecord, TaskState, utc_now

__all__ = ["DataPlane", "Published"]


@dataclass(frozen=True, slots=True)
class Published:
    """A result frozen in pages: its snapshot, the reference to it, its first page."""

    snapshot: SnapshotRecord
    reference: Reference
    first: Page


class DataPlane:
    """The data plane of one owner (a user, a tenant, a session).

    Args:
        store: the durable `Store`, or a `MemoryDataStore`.
        owner: whose data this is; every read of a reference or cursor checks it.
        clock: expiry is checked against it.
        page_bytes: the most UTF-8 bytes a page may have, header included.
        max_rows: the most rows a page may have (None: only bytes count).
        retention_s: how long published results, their references and cursors are kept.
    """

    def __init__(
        self,
        store: DataStore,
        *,
        owner: str,
        clock: Clock = utc_now,
        page_bytes: int = DEFAULT_PAGE_BYTES,
        max_rows: int | None = None,
        retention_s: float = DEFAULT_RETENTION_S,
    ) -> None:
        self.store = store
        self.owner = owner
        self.refs = References(store, owner=owner, clock=clock, ttl_s=retention_s)
        self.pages = Pager(
            store,
            owner=owner,
            clock=clock,
            page_bytes=page_bytes,
            max_rows=max_rows,
            retention_s=retention_s,
        )

    def for_owner(self, owner: str) -> DataPlane:
        """The same store and settings, for another owner."""
        return DataPlane(
            self.store,
            owner=owner,
            clock=self.pages.clock,
            page_bytes=self.pages.page_bytes,
            max_rows=self.pages.max_rows,
            retention_s=self.pages.retention_s,
        )

    def publish(
        self,
        rows: Sequence[Any],
        *,
        kind_of: str,
        source: str,
        query: Mapping[str, Any],
        sort: str | None = None,
        version: str | None = None,
        kind: Kind | None = None,
        range: str | None = None,  # the QRP1 header key's name
        time_key: str | None = None,
        extra: Mapping[str, str] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Published:
        """Freeze `rows` in pages, make a reference of kind `kind_of` to them, and render
        page 1 (`x-ref` and `next` in its header). See `Pager.publish` for the rest."""
        snapshot = self.pages.publish(
            rows,
            source=source,
            query=query,
            sort=sort,
            version=version,
            kind=kind,
            range=range,
            time_key=time_key,
            extra=extra,
        )
        reference = self.refs.create(snapshot, kind=kind_of, meta=meta)
        first = self.pages.page(snapshot, 1, reference=reference.token)
        return Published(snapshot, reference, first)

    def resolve(self, token: Any, *, kind: str | Collection[str] | None = None) -> Resolved:
        """A checked reference (see `References.resolve`)."""
        return self.refs.resolve(token, kind=kind)

    def first_page(self, token: Any, *, kind: str | Collection[str] | None = None) -> Page:
        """Page 1 of the referenced result."""
        resolved = self.refs.resolve(token, kind=kind)
        return self.pages.page(resolved.snapshot, 1, reference=resolved.reference.token)

    def read(
        self,
        cursor: str,
        *,
        reference: str | None = None,
        query: Mapping[str, Any] | None = None,
        sort: str | None = None,
        version: str | None = None,
        task: TaskState | None = None,
    ) -> Page:
        """The page `cursor` names. With `reference`, the cursor must page that result.

        Errors, first one wins: the task's terminal error, then the reference's, then
        the cursor's.
        """
        check_task(task)
        snapshot = None
        if reference is not None:
            snapshot = self.refs.resolve(reference).snapshot.id
        return self.pages.read(cursor, query=query, sort=sort, version=version, snapshot=snapshot)

    def segments(
        self, token: Any, *, kind: str | Collection[str] | None = None
    ) -> Iterator[list[Any]]:
        """The referenced rows page by page, read server-side (nothing reaches a model)."""
        return self.pages.segments(self.refs.resolve(token, kind=kind).snapshot)

    def rows(self, token: Any, *, kind: str | Collection[str] | None = None) -> list[Any]:
        """Every referenced row, read server-side."""
        return self.pages.rows(self.refs.resolve(token, kind=kind).snapshot)
