"""References on the real store (SQLite and PostgreSQL) and in memory: every read checks
the owner, the expiry, the snapshot and the kind, and refuses with a stable code."""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime import Agent, ToolError, tool
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane
from pi_runtime.data.refs import (
    REFERENCE_EXPIRED,
    REFERENCE_FORBIDDEN,
    REFERENCE_INVALID,
    REFERENCE_MISMATCH,
    REFERENCE_NOT_FOUND,
    References,
    format_reference,
    is_reference,
    parse_reference,
)
from pi_runtime.data.storage import DataStore
from pi_runtime.durable import SQLiteStore, Store
from pi_runtime.testing import ScriptedModel

ROWS = [{"id": i, "name": f"item {i}", "price": 1.5 * i} for i in range(40)]
QUERY = {"table": "items", "where": "price > 0"}


def plane(store: DataStore, clock: FakeClock, owner: str = "alice", **options: Any) -> DataPlane:
    options.setdefault("retention_s", 600)
    return DataPlane(store, owner=owner, clock=clock, **options)


def refused(code: str) -> Any:
    """pytest.raises for a ToolError of this kind."""
    return pytest.raises(ToolError, check=lambda exc: exc.kind == code)


def publish(data: DataPlane, rows: list[Any] = ROWS, kind_of: str = "items") -> Any:
    return data.publish(rows, kind_of=kind_of, source="db:items", query=QUERY, version="v1")


# --- the token -----------------------------------------------------------------------------


def test_a_reference_is_ref_colon_and_the_store_id() -> None:
    assert format_reference("ref-0a1b2c") == "ref:ref-0a1b2c"
    assert parse_reference("ref:ref-0a1b2c") == "ref-0a1b2c"
    assert is_reference("ref:x") and not is_reference("x") and not is_reference(7)
    with pytest.raises(ValueError, match="reference id"):
        format_reference("has space")


@pytest.mark.parametrize(
    "token",
    ["", "ref:", "REF:abc", "ref:a b", "ref:a|b", " ref:abc", "ref:abc\n", "ref:" + "a" * 65,
     "cursor", None, 42, ["ref:abc"]],
)  # fmt: skip
def test_a_malformed_reference_is_invalid(token: Any) -> None:
    with refused(REFERENCE_INVALID):
        parse_reference(token)


# --- on the store --------------------------------------------------------------------------


def test_a_reference_resolves_to_its_snapshot_and_reads_its_rows(
    store: Store, clock: FakeClock
) -> None:
    data = plane(store, clock)
    published = publish(data)

    resolved = data.resolve(published.reference.token, kind="items")

    assert published.reference.token.startswith("ref:")
    assert resolved.snapshot.id == published.snapshot.id
    assert resolved.reference.kind == "items"
    assert resolved.reference.version == "v1"
    assert resolved.reference.owner == "alice"
    assert data.rows(published.reference.token) == ROWS
    assert [r for seg in data.segments(published.reference.token) for r in seg] == ROWS


def test_an_unknown_reference_is_not_found(store: Store, clock: FakeClock) -> None:
    with refused(REFERENCE_NOT_FOUND):
        plane(store, clock).resolve("ref:ref-0000000000000000")


def test_another_owners_reference_is_forbidden_for_every_read(
    store: Store, clock: FakeClock
) -> None:
    alice = plane(store, clock)
    token = publish(alice).reference.token
    bob = alice.for_owner("bob")

    for read in (bob.resolve, bob.rows, bob.first_page, bob.segments):
        with refused(REFERENCE_FORBIDDEN):
            read(token)
    assert alice.rows(token) == ROWS  # still the owner's


def test_a_reference_cannot_be_made_to_another_owners_snapshot(
    store: Store, clock: FakeClock
) -> None:
    snapshot = publish(plane(store, clock)).snapshot

    with refused(REFERENCE_FORBIDDEN):
        References(store, owner="bob", clock=clock).create(snapshot, kind="items")


def test_a_reference_expires_on_the_clock(store: Store, clock: FakeClock) -> None:
    refs = References(store, owner="alice", clock=clock, ttl_s=60)
    snapshot = publish(plane(store, clock, retention_s=3600)).snapshot
    token = refs.create(snapshot, kind="items").token

    clock.advance(59)
    assert refs.resolve(token).snapshot.id == snapshot.id
    clock.advance(1)
    with refused(REFERENCE_EXPIRED) as caught:
        refs.resolve(token)
    assert "expired at" in caught.value.message


def test_a_reference_never_outlives_its_snapshot(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock, retention_s=100)
    snapshot = publish(data).snapshot
    long_lived = References(store, owner="alice", clock=clock, ttl_s=10_000)

    reference = long_lived.create(snapshot, kind="items")

    assert reference.expires_at == snapshot.expires_at
    clock.advance(100)
    with refused(REFERENCE_EXPIRED):
        long_lived.resolve(reference.token)


def test_a_purged_reference_is_not_found_rather_than_read_again(
    store: Store, clock: FakeClock
) -> None:
    data = plane(store, clock, retention_s=100)
    token = publish(data).reference.token
    clock.advance(101)

    assert store.purge_expired() >= 2  # the reference and its snapshot

    with refused(REFERENCE_NOT_FOUND):
        data.resolve(token)


def test_a_reference_of_another_kind_is_a_mismatch(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    token = publish(data, kind_of="crossovers").reference.token

    with refused(REFERENCE_MISMATCH) as caught:
        data.resolve(token, kind="klines")
    assert "'crossovers'" in caught.value.message
    assert data.resolve(token, kind=("klines", "crossovers")).reference.kind == "crossovers"


def test_a_reference_reads_its_snapshot_never_newer_data(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    old = publish(data).reference.token
    newer = [{**row, "price": row["price"] + 1} for row in ROWS]

    fresh = data.publish(newer, kind_of="items", source="db:items", query=QUERY, version="v2")

    assert data.rows(old) == ROWS
    assert data.rows(fresh.reference.token) == newer
    assert data.resolve(old).reference.version == "v1"


class ChangedSnapshots:
    """A store whose snapshots come back with other contents than they were made with."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_snapshot(self, snapshot_id: str) -> Any:
        found = self.inner.get_snapshot(snapshot_id)
        return None if found is None else dataclasses.replace(found, digest="0" * 64)


def test_a_snapshot_that_changed_under_a_reference_is_refused(
    store: Store, clock: FakeClock
) -> None:
    token = publish(plane(store, clock)).reference.token
    tampered = plane(ChangedSnapshots(store), clock)  # type: ignore[arg-type]

    with refused(REFERENCE_MISMATCH):
        tampered.rows(token)


def test_reference_errors_reach_the_model_as_kind_message_hint(
    store: Store, clock: FakeClock
) -> None:
    token = publish(plane(store, clock, owner="alice")).reference.token
    as_bob = plane(store, clock, owner="bob")

    @tool
    def total(items: str) -> float:
        """Sum the prices of referenced items."""
        return sum(row["price"] for row in as_bob.rows(items, kind="items"))

    model = ScriptedModel(
        [{"tool_calls": [{"name": "total", "arguments": {"items": token}}]}, {"text": "no"}]
    )
    result = Agent(model, tools=[total]).run_sync("sum them")

    message = result.messages[2]
    assert message.is_error  # type: ignore[union-attr]
    seen = json.loads(message.content)  # type: ignore[union-attr]
    assert seen["kind"] == REFERENCE_FORBIDDEN
    assert token in seen["message"] and seen["hint"]


# --- the storage seam ----------------------------------------------------------------------


def test_the_durable_store_has_the_data_store_operations_as_declared(store: Store) -> None:
    assert isinstance(store, DataStore)
    for name, member in inspect.getmembers(DataStore, inspect.isfunction):
        if name.startswith("_"):
            continue
        declared = inspect.signature(member).parameters
        actual = inspect.signature(getattr(SQLiteStore, name)).parameters
        assert [(p.name, p.kind, p.default) for p in declared.values()] == [
            (p.name, p.kind, p.default) for p in actual.values()
        ], name


def test_the_memory_store_behaves_like_the_durable_one(clock: FakeClock) -> None:
    memory = MemoryDataStore(clock=clock)
    assert isinstance(memory, DataStore)
    data = plane(memory, clock, retention_s=100)
    token = publish(data).reference.token

    assert data.rows(token) == ROWS
    with refused(REFERENCE_FORBIDDEN):
        data.for_owner("bob").rows(token)
    clock.advance(100)
    with refused(REFERENCE_EXPIRED):
        data.rows(token)
    assert memory.purge_expired() == 2
    with refused(REFERENCE_NOT_FOUND):
        data.rows(token)
    assert memory.signing_key("k") == memory.signing_key("k")
    with pytest.raises(LookupError):
        memory.create_reference(owner="alice", snapshot_id="snap-missing", kind="items")


def test_a_plane_needs_an_owner_and_a_positive_ttl(clock: FakeClock) -> None:
    memory = MemoryDataStore(clock=clock)
    with pytest.raises(ValueError, match="owner"):
        References(memory, owner="")
    with pytest.raises(ValueError, match="ttl_s"):
        References(memory, owner="a", ttl_s=0)
