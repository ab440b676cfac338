"""Pages and cursors on the real store (SQLite and PostgreSQL): pages stay under their byte
limit, a cursor reads the same page again, and a tampered, expired, foreign or mismatched
cursor is refused with a stable code — after a failed task's own error."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime import ToolError
from pi_runtime.bench.qrp import klines
from pi_runtime.data.cursor import (
    CURSOR_EXPIRED,
    CURSOR_FORBIDDEN,
    CURSOR_INVALID,
    CURSOR_MISMATCH,
    CURSOR_PREFIX,
    MAX_CURSOR_LENGTH,
    CursorClaims,
    CursorSigner,
)
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.pages import Page
from pi_runtime.data.plane import DataPlane, Published
from pi_runtime.data.storage import DataStore
from pi_runtime.durable import JobRecord, Store
from pi_runtime.qrp1 import decode, parse

BARS = klines(1_200)
QUERY = {"symbol": "BNBUSDT", "interval": "1h", "start": "2026-09-08T00:00:00Z", "fast": 20}
SORT = "time asc"


def plane(store: DataStore, clock: FakeClock, owner: str = "alice", **options: Any) -> DataPlane:
    options.setdefault("retention_s", 600)
    options.setdefault("page_bytes", 4_000)
    return DataPlane(store, owner=owner, clock=clock, **options)


def publish(data: DataPlane, rows: list[Any] = BARS, **options: Any) -> Published:
    options.setdefault("query", QUERY)
    options.setdefault("sort", SORT)
    options.setdefault("version", "v1")
    return data.publish(rows, kind_of="klines", source="synthetic:BNBUSDT:1h", **options)


def refused(code: str) -> Any:
    return pytest.raises(ToolError, check=lambda exc: exc.kind == code)


def every_page(data: DataPlane, first: Page, **read: Any) -> list[Page]:
    pages = [first]
    while pages[-1].next is not None:
        pages.append(data.read(pages[-1].next, **read))
    return pages


# --- pages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("page_bytes", [1_000, 4_000, 16_000])
def test_every_page_is_under_the_byte_limit_and_the_rows_come_back_whole(
    store: Store, clock: FakeClock, page_bytes: int
) -> None:
    data = plane(store, clock, page_bytes=page_bytes)
    published = publish(data, extra={"x-summary": "1200 hourly bars, closed"})

    pages = every_page(data, published.first)

    assert len(pages) == published.snapshot.page_count > 1
    assert all(len(p.text.encode()) <= page_bytes for p in pages)
    assert [row for p in pages for row in decode(p.text)] == BARS
    assert [p.offset for p in pages] == [sum(q.rows for q in pages[:i]) for i in range(len(pages))]
    # Full pages: the next row would not have fit (the page is as long as it can be).
    assert all(len(p.text.encode()) > page_bytes - 200 for p in pages[:-1])


def test_a_page_header_says_where_it_came_from(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    published = publish(data, range="2026-09-08T00:00:00Z/2026-10-28T00:00:00Z")

    first = parse(published.first.text).header
    second = parse(data.read(published.first.next or "").text).header

    assert first.snapshot == second.snapshot == published.snapshot.id
    assert first.extra["x-ref"] == published.reference.token and "x-ref" not in second.extra
    assert (first.page, first.pages, first.total) == (1, published.snapshot.page_count, 1_200)
    assert first.next == published.first.next and second.page == 2
    # One origin for the whole series: offsets on page 2 continue page 1's.
    assert first.t0 == second.t0 == BARS[0]["time"] and first.step_ms == second.step_ms
    assert second.offset == first.rows


def test_max_rows_bounds_a_page(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock, page_bytes=100_000, max_rows=500)
    pages = every_page(data, publish(data).first)
    assert [p.rows for p in pages] == [500, 500, 200]


def test_an_empty_result_is_one_empty_page(store: Store, clock: FakeClock) -> None:
    published = publish(plane(store, clock), rows=[])
    assert (published.first.count, published.first.rows, published.first.next) == (1, 0, None)
    assert decode(published.first.text) == []


def test_a_row_too_large_for_a_page_is_refused(store: Store, clock: FakeClock) -> None:
    rows = [{"id": 1, "text": "short"}, {"id": 2, "text": "x" * 3_000}]
    with pytest.raises(
        ValueError, match=r"row 1 alone makes a \d+-byte page; the page limit is 1000"
    ):
        publish(plane(store, clock, page_bytes=1_000), rows=rows)


def test_bad_paging_settings_are_refused(clock: FakeClock) -> None:
    memory = MemoryDataStore()
    with pytest.raises(ValueError, match="page_bytes"):
        plane(memory, clock, page_bytes=100)
    with pytest.raises(ValueError, match="max_rows"):
        plane(memory, clock, max_rows=0)
    with pytest.raises(TypeError, match="list of rows"):
        publish(plane(memory, clock), rows={"a": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="table or a series"):
        publish(plane(memory, clock), rows=BARS[:3], kind="record")
    with pytest.raises(ValueError, match="x-ref is written by the pager"):
        publish(plane(memory, clock), rows=BARS[:3], extra={"x-ref": "ref:mine"})
    with pytest.raises(ValueError, match="time_key is for a series"):
        publish(plane(memory, clock), rows=[{"a": 1}], kind="table", time_key="a")


def test_an_irregular_series_pages_from_one_origin(store: Store, clock: FakeClock) -> None:
    ticks = [
        {"ts": f"2026-09-08T00:{i // 60:02d}:{i % 60:02d}.{(i * 37) % 1000:03d}Z", "px": i * 0.25}
        for i in range(0, 3_000, 7)
    ]
    data = plane(store, clock, page_bytes=1_500)
    pages = every_page(data, publish(data, rows=ticks, kind="series").first)

    headers = [parse(p.text).header for p in pages]
    assert len(pages) > 3 and {h.t0 for h in headers} == {ticks[0]["ts"]}
    assert [row for p in pages for row in decode(p.text)] == ticks


def test_a_page_is_served_only_to_its_owner_and_in_range(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    snapshot = publish(data).snapshot
    with refused("reference_forbidden"):
        data.for_owner("bob").pages.page(snapshot)
    with pytest.raises(ValueError, match="page 99 of a result of"):
        data.pages.page(snapshot, 99)
    assert data.pages.page(snapshot, 2) == data.read(data.pages.page(snapshot).next or "")


hostile = st.text(st.characters(codec="utf-8"), max_size=60)
rows_strategy = st.lists(
    st.fixed_dictionaries({"k": st.integers(), "s": hostile, "f": st.floats(allow_nan=False,
                          allow_infinity=False), "n": st.none() | st.booleans()}),
    max_size=80,
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, page_bytes=st.integers(700, 5_000))
def test_any_rows_page_under_any_limit_and_come_back_exactly(
    rows: list[dict[str, Any]], page_bytes: int
) -> None:
    data = DataPlane(MemoryDataStore(), owner="alice", page_bytes=page_bytes)
    published = publish(data, rows=rows)
    pages = every_page(data, published.first)
    assert all(len(p.text.encode()) <= page_bytes for p in pages)
    assert [row for p in pages for row in decode(p.text)] == rows


# --- cursors: same page, bound ---------------------------------------------------------------


def test_the_same_cursor_reads_the_same_page_byte_for_byte(
    store: Store, clock: FakeClock, store_factory: Callable[..., Store]
) -> None:
    data = plane(store, clock)
    cursor = publish(data).first.next
    assert cursor is not None

    once = data.read(cursor)
    clock.advance(300)
    again = data.read(cursor)
    # Another process on the same database: the key is shared, the page is the same.
    elsewhere = plane(store_factory(), clock).read(cursor)

    assert once == again == elsewhere
    assert once.next is not None and data.read(once.next).number == 3


def test_a_cursor_is_short_opaque_and_signed(store: Store, clock: FakeClock) -> None:
    cursor = publish(plane(store, clock)).first.next or ""
    assert cursor.startswith(CURSOR_PREFIX)
    assert len(cursor) <= MAX_CURSOR_LENGTH and "=" not in cursor
    signer = CursorSigner(store.signing_key("data-cursor-v1"))
    assert signer.verify(cursor).seq == 1
    with refused(CURSOR_INVALID):
        CursorSigner(b"another key, 16+ bytes").verify(cursor)


def test_a_cursor_continues_only_its_own_query(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    cursor = publish(data).first.next or ""

    respelled = {"fast": 20.0, **{k: v for k, v in QUERY.items() if k != "fast"}}
    assert data.read(cursor, query=respelled).number == 2  # key order, 20 vs 20.0
    with refused(CURSOR_MISMATCH) as caught:
        data.read(cursor, query={**QUERY, "symbol": "ETHUSDT"})
    assert "symbol" in caught.value.message
    with refused(CURSOR_MISMATCH):
        data.read(cursor, sort="time desc")
    with refused(CURSOR_MISMATCH):
        data.read(cursor, version="v2")


def test_a_cursor_belongs_to_its_result(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    one, other = publish(data), publish(data)

    assert data.read(one.first.next or "", reference=one.reference.token).number == 2
    with refused(CURSOR_MISMATCH):
        data.read(one.first.next or "", reference=other.reference.token)


def test_new_data_never_changes_what_an_old_cursor_reads(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    old = publish(data)
    newer = [{**bar, "close": bar["close"] + 1} for bar in BARS]
    new = publish(data, rows=newer, version="v2")

    old_rows = [r for p in every_page(data, old.first) for r in decode(p.text)]
    new_rows = [r for p in every_page(data, new.first) for r in decode(p.text)]

    assert old_rows == BARS and new_rows == newer


class ChangedSnapshots:
    """A store whose snapshots come back with other contents than they were made with."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_snapshot(self, snapshot_id: str) -> Any:
        found = self.inner.get_snapshot(snapshot_id)
        return None if found is None else dataclasses.replace(found, digest="f" * 64)


def test_a_cursor_of_a_result_that_changed_is_a_mismatch(store: Store, clock: FakeClock) -> None:
    cursor = publish(plane(store, clock)).first.next or ""
    with refused(CURSOR_MISMATCH):
        plane(ChangedSnapshots(store), clock).read(cursor)  # type: ignore[arg-type]


# --- cursors: refused ------------------------------------------------------------------------


def test_a_cursor_expires_with_its_result(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock, retention_s=120)
    cursor = publish(data).first.next or ""

    clock.advance(119)
    assert data.read(cursor).number == 2
    clock.advance(1)
    with refused(CURSOR_EXPIRED):
        data.read(cursor)


def test_a_cursor_of_a_purged_result_is_expired_not_reread(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock, retention_s=120)
    cursor = publish(data).first.next or ""
    clock.advance(121)
    assert store.purge_expired() >= 1
    with refused(CURSOR_EXPIRED):
        data.read(cursor)


def test_another_owners_cursor_is_forbidden(store: Store, clock: FakeClock) -> None:
    cursor = publish(plane(store, clock)).first.next or ""
    with refused(CURSOR_FORBIDDEN):
        plane(store, clock, owner="mallory").read(cursor)


@pytest.mark.parametrize(
    "bad", ["", "c1.", "c2.AAAA", "ref:ref-1", "c1.!!!!", "c1.AAAAA", "c1." + "A" * 200]
)
def test_a_malformed_cursor_is_invalid(store: Store, clock: FakeClock, bad: str) -> None:
    with refused(CURSOR_INVALID):
        plane(store, clock).read(bad)


def test_every_single_character_change_of_a_cursor_is_invalid(
    store: Store, clock: FakeClock
) -> None:
    data = plane(store, clock)
    cursor = publish(data).first.next or ""
    alphabet = "AQgw_-09azZ."
    for index in range(len(cursor)):
        for char in alphabet:
            if char != cursor[index]:
                changed = cursor[:index] + char + cursor[index + 1 :]
                with refused(CURSOR_INVALID):
                    data.read(changed)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4)
)
def test_random_byte_flips_of_a_cursor_never_read_data(
    store: Store, clock: FakeClock, flips: list[tuple[int, int]]
) -> None:
    data = plane(store, clock)
    cursor = _cursor_for(store, data)
    assert data.read(cursor).number == 2  # the untouched cursor reads: the check is not vacuous
    raw = bytearray(cursor.encode())
    for position, mask in flips:
        raw[position % len(raw)] ^= mask
    changed = raw.decode("utf-8", errors="replace")
    if changed == cursor:  # flips that cancel out are not tampering
        return
    with refused(CURSOR_INVALID):
        data.read(changed)


_issued: dict[str, str] = {}


def _cursor_for(store: Store, data: DataPlane) -> str:
    """One cursor per database across the hypothesis examples (publishing is the slow part)."""
    key = store.url
    if key not in _issued:
        _issued.clear()
        _issued[key] = publish(data).first.next or ""
    return _issued[key]


@pytest.mark.parametrize("id_length", [1, 2, 3])
def test_no_other_spelling_of_a_cursor_verifies(id_length: int) -> None:
    """Base64 leaves spare bits in the last character when the length is not a multiple
    of 3 bytes: a changed spare bit must not read as the same cursor."""
    signer = CursorSigner("ab" * 32)
    claims = CursorClaims(snapshot="s" * id_length, seq=1, expires=0, binding=b"\x00" * 8)
    cursor = signer.sign(claims)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for index in range(len(CURSOR_PREFIX), len(cursor)):
        for char in alphabet:
            if char != cursor[index]:
                with refused(CURSOR_INVALID):
                    signer.verify(cursor[:index] + char + cursor[index + 1 :])


def test_claims_round_trip_and_refuse_what_a_cursor_cannot_hold() -> None:
    signer = CursorSigner("00" * 32)
    claims = CursorClaims(snapshot="snap-1", seq=7, expires=1_900_000_000, binding=b"12345678")
    assert signer.verify(signer.sign(claims)) == claims
    with pytest.raises(ValueError, match="snapshot id"):
        signer.sign(dataclasses.replace(claims, snapshot="s" * 65))
    with pytest.raises(ValueError, match="16 bytes"):
        CursorSigner(b"short")


# --- a failed task's error comes first (seed 004) ---------------------------------------------


def failed_job(store: Store, *, outcome_unknown: bool = False) -> JobRecord:
    store.enqueue_job("compute", {"fast": 50, "slow": 20})
    job = store.claim_job("worker-1")
    assert job is not None
    error = {"kind": "invalid_arguments", "message": "slow must exceed fast", "hint": "swap them"}
    return store.fail_job(job.id, "worker-1", error, outcome_unknown=outcome_unknown)


def test_a_failed_tasks_error_wins_over_a_cursor_error(store: Store, clock: FakeClock) -> None:
    data = plane(store, clock)
    job = failed_job(store)

    for cursor in ("c1.tampered", publish(data).first.next or ""):
        with refused("task_failed") as caught:
            data.read(cursor, task=job)
        assert "slow must exceed fast" in caught.value.message
        assert job.id in caught.value.message and caught.value.hint == "swap them"


def test_a_task_with_an_unknown_outcome_says_so_before_any_cursor_error(
    store: Store, clock: FakeClock
) -> None:
    job = failed_job(store, outcome_unknown=True)
    with refused("outcome_unknown"):
        plane(store, clock).read("c1.tampered", task=job)


def test_a_finished_task_lets_the_cursor_error_through(store: Store, clock: FakeClock) -> None:
    store.enqueue_job("compute", {})
    job = store.claim_job("worker-1")
    assert job is not None
    done = store.complete_job(job.id, "worker-1", {"ok": True})
    with refused(CURSOR_INVALID):
        plane(store, clock).read("c1.tampered", task=done)
