"""How a result is cut into pages: as full as the byte limit allows, and found with about
as much encoding as the result's own size, whatever mix of small and large rows it has."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_runtime.data.layout import PagePlan, row_floors, split_sizes
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane


def mixed_rows(count: int, large: int) -> list[dict[str, Any]]:
    """Mostly one-character rows, a quarter of them `large` characters."""
    pick = random.Random(1)
    return [{"i": i, "s": "x" * pick.choice([1, 1, 1, large])} for i in range(count)]


def plan_of(rows: list[Any]) -> PagePlan:
    return PagePlan.make(rows, None, "s", None, None, {})


def test_mixed_row_sizes_cost_about_their_own_size_to_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = mixed_rows(1_500, 5_000)
    measured = {"bytes": 0}
    measure = PagePlan.measure

    def counting(self: PagePlan, start: int, size: int, number: int) -> int:
        found = measure(self, start, size, number)
        measured["bytes"] += found
        return found

    monkeypatch.setattr(PagePlan, "measure", counting)
    published = DataPlane(MemoryDataStore(), owner="alice", page_bytes=8_000).publish(
        rows, kind_of="k", source="s", query={}
    )

    data = sum(len(row["s"]) for row in rows)
    assert published.snapshot.page_count > 100
    # Each probe stays near the page limit: no probe encodes rows far past it.
    assert measured["bytes"] < 10 * data


def test_each_page_of_mixed_rows_is_as_full_as_the_limit_allows() -> None:
    rows = mixed_rows(600, 5_000)
    plan = plan_of(rows)
    sizes = split_sizes(len(rows), plan.measure, 8_000, None, plan.floors())

    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    assert sum(sizes) == len(rows)
    for number, (start, size) in enumerate(zip(starts, sizes, strict=True), 1):
        assert plan.measure(start, size, number) <= 8_000
        if start + size < len(rows):
            assert plan.measure(start, size + 1, number) > 8_000


cells = st.one_of(
    st.text(st.sampled_from('x,|\\"é\n\ud800'), max_size=30),
    st.sampled_from(["", "same" * 20, ",,,,,,,,"]),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=12),
)
table_rows = st.lists(
    st.one_of(
        st.fixed_dictionaries({"a": cells, "b": cells}),
        st.fixed_dictionaries({"a": cells}),
        st.lists(cells, max_size=3),
    ),
    min_size=1,
    max_size=40,
)
repeated = table_rows.flatmap(lambda rows: st.integers(1, 3).map(lambda n: rows * n))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=repeated, data=st.data())
def test_no_page_is_smaller_than_the_floors_of_its_rows(rows: list[Any], data: Any) -> None:
    plan = plan_of(rows)
    sums = row_floors(rows)
    start = data.draw(st.integers(0, len(rows) - 1))
    size = data.draw(st.integers(1, len(rows) - start))

    assert plan.measure(start, size, 1) >= sums[start + size] - sums[start + 1]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=repeated, limit=st.integers(300, 3_000))
def test_floors_change_how_pages_are_searched_not_where_they_end(
    rows: list[Any], limit: int
) -> None:
    plan = plan_of(rows)
    try:
        plain = split_sizes(len(rows), plan.measure, limit, None)
    except ValueError:
        return  # a row alone is over the limit, with or without floors
    assert split_sizes(len(rows), plan.measure, limit, None, plan.floors()) == plain


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.lists(cells, min_size=1, max_size=40), step=st.sampled_from([0, 1]), data=st.data()
)
def test_no_series_page_is_smaller_than_the_floors_of_its_rows(
    values: list[Any], step: int, data: Any
) -> None:
    # step 0: times a fixed step apart (the time column is left out); 1: irregular times
    rows = [
        {"t": 1_700_000_000_000 + 60_000 * k + step * k * k, "v": v} for k, v in enumerate(values)
    ]
    plan = PagePlan.make(rows, "series", "s", None, "t", {})
    sums = plan.floors()
    start = data.draw(st.integers(0, len(rows) - 1))
    size = data.draw(st.integers(1, len(rows) - start))

    assert plan.measure(start, size, 1) >= sums[start + size] - sums[start + 1]
