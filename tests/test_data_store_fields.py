"""The data plane's writes are checked alike by every store: the same bad input gets the
same `UserError` from the memory store, SQLite and PostgreSQL, and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import PgCluster
from pi_runtime.data.fields import NewReference, NewSnapshot
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.storage import DataStore
from pi_runtime.durable import open_store, schema
from pi_runtime.exceptions import UserError

GOOD_SNAPSHOT: dict[str, Any] = {"owner": "alice", "source": "db:items", "pages": ["a", "b"]}

BAD_SNAPSHOTS: list[tuple[str, dict[str, Any], str]] = [
    ("empty-owner", {"owner": ""}, "owner must be a non-empty string of at most 200 characters"),
    ("long-source", {"source": "s" * 201}, "source must be a non-empty string of at most 200"),
    ("owner-not-a-string", {"owner": 7}, "owner must be a non-empty string"),
    ("owner-with-newline", {"owner": "al\nice"}, "owner must be printable, without surrounding"),
    ("owner-with-spaces", {"owner": " alice"}, "owner must be printable, without surrounding"),
    ("page-not-a-string", {"pages": ["a", 3]}, "snapshot pages must be strings"),
    ("pages-one-string", {"pages": "ab"}, "snapshot pages must be a list of strings, not str"),
    ("page-rows-too-many", {"page_rows": [1, 2, 3]}, "page_rows has 3 counts for 2 pages"),
    ("page-rows-too-few", {"page_rows": [1]}, "page_rows has 1 counts for 2 pages"),
    ("page-rows-negative", {"page_rows": [1, -1]}, "page_rows must be non-negative integers"),
    ("page-rows-text", {"page_rows": ["1", "1"]}, "page_rows must be non-negative integers"),
    ("meta-nan", {"meta": {"x": float("nan")}}, "snapshot meta must be plain JSON"),
    ("meta-object", {"meta": {"x": object()}}, "snapshot meta must be plain JSON"),
    ("meta-list", {"meta": [1]}, "snapshot meta must be a JSON object or None, not list"),
    ("locator-set", {"locator": {"ids": {1, 2}}}, "snapshot locator must be plain JSON"),
    ("version-number", {"version": 7}, "snapshot version must be a string, not int"),
    ("naive-expiry", {"expires_at": datetime(2030, 1, 2)}, "expires_at must be timezone-aware"),
    ("expiry-text", {"expires_at": "tomorrow"}, "expires_at must be a datetime or None, not str"),
    (
        "unknown-keyword",
        {"owners": "bob"},
        "put_snapshot() got unknown keyword arguments 'owners'; it takes owner, source, pages, "
        "page_rows, locator, version, meta, expires_at",
    ),
    ("missing-pages", {"pages": None}, "put_snapshot() needs the keyword arguments pages"),
]

BAD_REFERENCES: list[tuple[str, dict[str, Any], str]] = [
    ("empty-owner", {"owner": ""}, "owner must be a non-empty string of at most 200 characters"),
    ("kind-with-tab", {"kind": "a\tb"}, "reference kind must be printable, without surrounding"),
    ("meta-infinity", {"meta": {"x": float("inf")}}, "reference meta must be plain JSON"),
    ("snapshot-id-number", {"snapshot_id": 3}, "snapshot_id must be a string, not int"),
    ("naive-expiry", {"expires_at": datetime(2030, 1, 2)}, "expires_at must be timezone-aware"),
    (
        "unknown-keyword",
        {"ttl": 5},
        "create_reference() got unknown keyword arguments 'ttl'; it takes owner, snapshot_id, "
        "kind, meta, expires_at",
    ),
    ("missing-kind", {"kind": None}, "create_reference() needs the keyword arguments kind"),
]


def with_changes(good: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`good` with `changes` applied; a change to None leaves the key out."""
    fields = {**good, **changes}
    return {key: value for key, value in fields.items() if changes.get(key, 0) is not None}


@dataclass(frozen=True)
class Backend:
    store: DataStore
    url: str | None  # the database's, None for the memory store

    def stored(self) -> tuple[int, int, int]:
        """How many snapshots, pages and references the store holds."""
        if isinstance(self.store, MemoryDataStore):
            memory = self.store
            return len(memory._snapshots), len(memory._pages), len(memory._refs)
        assert self.url is not None
        engine = sa.create_engine(self.url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as conn:
                tables = (schema.snapshots, schema.pages, schema.resource_refs)
                counts = [
                    conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                    for table in tables
                ]
        finally:
            engine.dispose()
        return counts[0], counts[1], counts[2]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The memory store, or the durable store on a fresh SQLite or PostgreSQL database."""
    if request.param == "memory":
        yield Backend(MemoryDataStore(), None)
        return
    if request.param == "sqlite":
        url, drop = f"sqlite:///{tmp_path / 'pi.db'}", None
    else:
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        drop = cluster.create_schema()
        url = cluster.url(schema=drop)
    store = open_store(url)
    try:
        yield Backend(store, url)
    finally:
        store.close()
        if drop is not None:
            cluster.drop_schema(drop)


@pytest.mark.parametrize(
    ("changes", "message"), [c[1:] for c in BAD_SNAPSHOTS], ids=[c[0] for c in BAD_SNAPSHOTS]
)
def test_a_bad_snapshot_is_refused_alike_and_nothing_is_stored(
    backend: Backend, changes: dict[str, Any], message: str
) -> None:
    fields = with_changes(GOOD_SNAPSHOT, changes)
    with pytest.raises(UserError) as refused:
        backend.store.put_snapshot(**fields)
    assert message in str(refused.value)
    assert backend.stored() == (0, 0, 0)


@pytest.mark.parametrize(
    ("changes", "message"), [c[1:] for c in BAD_REFERENCES], ids=[c[0] for c in BAD_REFERENCES]
)
def test_a_bad_reference_is_refused_alike_and_nothing_is_stored(
    backend: Backend, changes: dict[str, Any], message: str
) -> None:
    snapshot = backend.store.put_snapshot(**GOOD_SNAPSHOT)
    good = {"owner": "alice", "snapshot_id": snapshot.id, "kind": "items"}
    with pytest.raises(UserError) as refused:
        backend.store.create_reference(**with_changes(good, changes))
    assert message in str(refused.value)
    assert backend.stored() == (1, 2, 0)


def test_a_reference_to_a_missing_snapshot_is_a_lookup_error_everywhere(
    backend: Backend,
) -> None:
    with pytest.raises(LookupError, match="no snapshot 'snap-missing'"):
        backend.store.create_reference(owner="alice", snapshot_id="snap-missing", kind="items")
    assert backend.stored() == (0, 0, 0)


def test_every_store_keeps_the_same_record_from_the_same_fields(backend: Backend) -> None:
    """Meta and locator come back as JSON gives them (tuples as lists), and a caller
    changing its dict afterwards changes nothing stored."""
    meta: dict[str, Any] = {"columns": ("id", "name"), "note": "北京"}
    fields: NewSnapshot = {
        "owner": "alice",
        "source": "db:items",
        "pages": ["a", "bc", ""],
        "page_rows": [1, 2, 0],
        "locator": {"table": "items"},
        "version": "v7",
        "meta": meta,
    }
    snapshot = backend.store.put_snapshot(**fields)
    meta["note"] = "changed"
    assert (snapshot.page_count, snapshot.row_count, snapshot.version) == (3, 3, "v7")
    assert snapshot.meta == {"columns": ["id", "name"], "note": "北京"}
    assert backend.store.get_snapshot(snapshot.id) == snapshot
    rows = [backend.store.get_page(snapshot.id, seq) for seq in range(3)]
    assert [(p.body, p.row_count) for p in rows if p] == [("a", 1), ("bc", 2), ("", 0)]

    ref_fields: NewReference = {"owner": "alice", "snapshot_id": snapshot.id, "kind": "items"}
    reference = backend.store.create_reference(**ref_fields)
    assert (reference.meta, reference.expires_at) == (None, None)
    assert backend.store.get_reference(reference.id) == reference
