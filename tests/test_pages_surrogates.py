"""A lone surrogate in what a result is published under (its query, sort or version, often
written by a model) is repaired where it enters, like the rest of the model's text: every
page reads on by cursor, and every store keeps the result."""

from __future__ import annotations

from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime.data.cursor import binding
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.pages import Page
from pi_runtime.data.plane import DataPlane
from pi_runtime.data.storage import DataStore
from pi_runtime.durable import Store

ROWS = [{"n": i, "text": str(i) * 40} for i in range(30)]
BOUND = {
    "query": {"query": {"q": "caf\udce9"}},
    "sort": {"query": {}, "sort": "caf\udce9 asc"},
    "version": {"query": {}, "version": "v\udce9"},
}


def read_every_page(data: DataPlane, bound: dict[str, Any]) -> list[Page]:
    published = data.publish(ROWS, kind_of="k", source="s", **bound)
    pages = [published.first]
    while pages[-1].next is not None:
        # The caller reads on with what it published under, surrogate and all.
        cursor = pages[-1].next
        pages.append(data.read(cursor, reference=published.reference.token, **bound))
    return pages


@pytest.mark.parametrize("bound", BOUND.values(), ids=BOUND)
def test_a_lone_surrogate_in_what_a_result_is_bound_to_still_pages(bound: dict[str, Any]) -> None:
    data = DataPlane(MemoryDataStore(), owner="alice", page_bytes=600)

    pages = read_every_page(data, bound)

    assert len(pages) > 1
    assert pages[-1].offset + pages[-1].rows == len(ROWS)


@pytest.mark.parametrize("bound", BOUND.values(), ids=BOUND)
def test_every_store_keeps_a_result_bound_to_a_lone_surrogate(
    store: Store, clock: FakeClock, bound: dict[str, Any]
) -> None:
    data = DataPlane(store, owner="alice", clock=clock, page_bytes=600)

    pages = read_every_page(data, bound)

    snapshot = data.store.get_snapshot(pages[0].snapshot)
    assert snapshot is not None and len(pages) == snapshot.page_count > 1
    assert snapshot.version in (None, "v\ufffd")
    assert snapshot.locator in ({}, {"q": "caf\ufffd"})


def test_a_store_repairs_a_lone_surrogate_it_is_handed_directly() -> None:
    store: DataStore = MemoryDataStore()
    snapshot = store.put_snapshot(
        owner="alice",
        source="s",
        pages=["QRP1|table|rows=0|cols="],
        locator={"q\udce9": ["caf\udce9"]},
        version="v\udce9",
        meta={"sort": "caf\udce9"},
    )
    assert snapshot.version == "v\ufffd"
    assert snapshot.locator == {"q\ufffd": ["caf\ufffd"]}
    assert snapshot.meta == {"sort": "caf\ufffd"}


def test_a_binding_over_a_lone_surrogate_is_made_not_raised() -> None:
    made = binding(query={"q": "\udce9"}, sort="\ud800", version="\udfff", digest="d")
    assert len(made) == 8
    assert made != binding(query={"q": "\ufffd"}, sort="\ud800", version="\udfff", digest="d")
