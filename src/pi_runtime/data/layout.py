"""How a result is cut into pages: each as full as it can be under a byte limit.

Every page is measured as it will be read — with the longest snapshot id, `next` cursor
and (page 1) `x-ref` a page can get filled in later — so the limit holds whatever the
store's ids and cursors turn out to be. Only sizes that were measured are kept.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..qrp1 import Kind, PageInfo, choose_kind, encode
from ..qrp1.header import parse_header
from .cursor import MAX_CURSOR_LENGTH, MAX_SNAPSHOT_ID
from .refs import MAX_REFERENCE_LENGTH

__all__ = ["REF_KEY", "PagePlan", "row_floors", "split_sizes"]

REF_KEY = "x-ref"
"""The header key that carries the result's reference on its first page."""

# Placeholders as long as the longest real values: a page measured with them still fits
# once the real ones are filled in.
_SNAPSHOT_SLOT = "s" * MAX_SNAPSHOT_ID
_CURSOR_SLOT = "c" * MAX_CURSOR_LENGTH
_REF_SLOT = "r" * MAX_REFERENCE_LENGTH


@dataclass(frozen=True, slots=True)
class PagePlan:
    """How to encode any run of the rows as page k: fixed kind, series origin and step."""

    rows: list[Any]
    kind: Kind
    source: str
    range: str | None
    series: Mapping[str, Any]
    extra: dict[str, str]

    @classmethod
    def make(
        cls,
        rows: list[Any],
        kind: Kind | None,
        source: str,
        range: str | None,
        time_key: str | None,
        extra: dict[str, str],
    ) -> PagePlan:
        chosen: Kind = kind or choose_kind(rows)
        if chosen not in ("table", "series"):
            raise ValueError(f"pages hold a table or a series, not a {chosen}")
        if REF_KEY in extra:
            raise ValueError(f"{REF_KEY} is written by the pager")
        series: dict[str, Any] = {}
        if chosen == "series" and rows:
            # One t0 and step for every page: found once over the whole result.
            whole = encode(rows, kind="series", time_key=time_key, fallback=False)
            found = parse_header(whole.partition("\n")[0])
            time_col = next(c.name for c in found.cols or () if c.type == "dt_ms")
            series = {"time_key": time_col, "t0": found.t0, "step_ms": found.step_ms}
        elif time_key is not None:
            raise ValueError("time_key is for a series")
        return cls(rows, chosen, source, range, series, extra)

    def encode(self, start: int, size: int, number: int, count: int, slots: bool) -> str:
        page = PageInfo(
            number=number,
            count=count,
            offset=start,
            total=len(self.rows),
            next=_CURSOR_SLOT if slots else None,
        )
        extra = dict(self.extra) if number == 1 else {}
        if slots and number == 1:
            extra = {REF_KEY: _REF_SLOT, **extra}
        return encode(
            self.rows[start : start + size],
            kind=self.kind,
            source=self.source,
            snapshot=_SNAPSHOT_SLOT if slots else None,
            range=self.range,
            page=page,
            extra=extra,
            **self.series,
        )

    def measure(self, start: int, size: int, number: int) -> int:
        # The page count is not known yet: the row count bounds it (as many digits or more).
        upper = max(1, len(self.rows))
        return len(self.encode(start, size, number, upper, slots=True).encode())

    def floors(self) -> list[int]:
        """`row_floors` of the rows; a series' time field is left out (the step may imply it)."""
        return row_floors(self.rows, self.series.get("time_key"))

    def bodies(self, sizes: list[int]) -> list[str]:
        out, start = [], 0
        for index, size in enumerate(sizes):
            out.append(self.encode(start, size, index + 1, len(sizes), slots=False))
            start += size
        return out


def row_floors(rows: Sequence[Any], skip: str | None = None) -> list[int]:
    """Prefix sums of the bytes each row surely adds to a page that holds the row before it.

    `sums[j] - sums[i + 1]` is at most the size of any page holding rows i to j - 1: each
    later row adds a line break (or a comma), and a value that differs from the row
    before cannot be hoisted, so it is written whole in some cell. `skip` is a series'
    time field, which the step may leave out.
    """
    sums = [0] * (len(rows) + 1)
    for index in range(1, len(rows)):
        sums[index + 1] = sums[index] + _added(rows[index - 1], rows[index], skip)
    return sums


_MISSING = object()


def _added(before: Any, row: Any, skip: str | None) -> int:
    if not isinstance(before, dict) or not isinstance(row, dict):
        return 1 + _text_floor(row)  # not a table row: only body=json carries it, whole
    size = 1
    for key, value in row.items():
        old = before.get(key, _MISSING)
        if key != skip and (type(old) is not type(value) or old != value):
            size += _text_floor(value)
    return size


def _text_floor(value: Any) -> int:
    """Characters `value` takes at least in a cell or in JSON (numbers counted as none)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict | list):
        try:
            return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        except (TypeError, ValueError, RecursionError):
            return 0  # not JSON: encoding the page says so
    return 0


def split_sizes(
    total: int,
    measure: Callable[[int, int, int], int],
    limit: int,
    max_rows: int | None,
    floors: Sequence[int] | None = None,
) -> list[int]:
    """Rows per page: each page as full as it can be under `limit` bytes.

    `floors` (see `row_floors`) keeps each measured page near `limit` bytes, so mixed
    small and large rows cost about as much to measure as the result's size.
    """
    if total == 0:
        size = measure(0, 0, 1)
        if size > limit:
            raise ValueError(f"an empty page is {size} bytes; the page limit is {limit}")
        return [0]
    reach = _Reach(floors or [0] * (total + 1), limit)
    sizes: list[int] = []
    start, guess = 0, 32
    while start < total:
        cap = min(total - start, max_rows or total)
        fits = _fill_page(start, cap, len(sizes) + 1, guess, measure, reach)
        sizes.append(fits)
        start += fits
        guess = fits
    return sizes


@dataclass(frozen=True, slots=True)
class _Reach:
    """How many rows can be on a page, by the bytes `row_floors` says they add."""

    sums: Sequence[int]
    limit: int

    def most(self, start: int, cap: int, count: int, used: int) -> int:
        """The most rows (at most `cap`) a page from `start` holding `count` rows in
        `used` bytes could grow to before its later rows surely pass the limit."""
        budget = self.sums[start + count] + self.limit - used
        end = bisect_right(self.sums, budget, start + count, start + cap + 1)
        return end - 1 - start


def _fill_page(
    start: int,
    cap: int,
    number: int,
    guess: int,
    measure: Callable[[int, int, int], int],
    reach: _Reach,
) -> int:
    """The most rows from `start` (at most `cap`) whose page measures within the limit."""
    single = measure(start, 1, number)
    if single > reach.limit:
        raise ValueError(
            f"row {start} alone makes a {single}-byte page; the page limit is {reach.limit} "
            "bytes (raise page_bytes or return less per row)"
        )
    # Search the largest size that fits: guess from the bytes a row adds (on average, and
    # by the floors of the next rows), bisect when a guess overshoots. Only measured sizes
    # are kept, so the limit always holds; no probe holds rows whose floors alone pass it.
    fits, fits_bytes, fails = 1, single, reach.most(start, cap, 1, 0) + 1
    probe, overshot = min(guess, reach.most(start, cap, 1, single)), False
    while fails - fits > 1:
        probe = min(max(probe, fits + 1), fails - 1)
        if overshot:
            probe = min(probe, (fits + fails) // 2)
        size = measure(start, probe, number)
        per_row = max(1.0, (size - single) / (probe - 1))
        overshot = size > reach.limit
        if overshot:
            fails = probe
        else:
            fits, fits_bytes = probe, size
        by_average = fits + int((reach.limit - fits_bytes) / per_row)
        probe = min(by_average, reach.most(start, cap, fits, fits_bytes))
    return fits
