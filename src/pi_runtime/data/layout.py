"""How a result is cut into pages: each as full as it can be under a byte limit.

Every page is measured as it will be read — with the longest snapshot id, `next` cursor
and (page 1) `x-ref` a page can get filled in later — so the limit holds whatever the
store's ids and cursors turn out to be. Only sizes that were measured are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..qrp1 import Kind, PageInfo, choose_kind, encode
from ..qrp1.header import parse_header
from .cursor import MAX_CURSOR_LENGTH, MAX_SNAPSHOT_ID
from .refs import MAX_REFERENCE_LENGTH

__all__ = ["REF_KEY", "PagePlan", "split_sizes"]

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

    def bodies(self, sizes: list[int]) -> list[str]:
        out, start = [], 0
        for index, size in enumerate(sizes):
            out.append(self.encode(start, size, index + 1, len(sizes), slots=False))
            start += size
        return out


def split_sizes(
    total: int, measure: Callable[[int, int, int], int], limit: int, max_rows: int | None
) -> list[int]:
    """Rows per page: each page as full as it can be under `limit` bytes."""
    if total == 0:
        size = measure(0, 0, 1)
        if size > limit:
            raise ValueError(f"an empty page is {size} bytes; the page limit is {limit}")
        return [0]
    sizes: list[int] = []
    start, guess = 0, 32
    while start < total:
        number = len(sizes) + 1
        cap = min(total - start, max_rows or total)
        single = measure(start, 1, number)
        if single > limit:
            raise ValueError(
                f"row {start} alone makes a {single}-byte page; the page limit is {limit} "
                "bytes (raise page_bytes or return less per row)"
            )
        # Search the largest size that fits: guess from the bytes a row adds, bisect when
        # a guess overshoots. Only measured sizes are kept, so the limit always holds.
        fits, fits_bytes, fails = 1, single, cap + 1
        probe, overshot = guess, False
        while fails - fits > 1:
            probe = min(max(probe, fits + 1), fails - 1)
            if overshot:
                probe = min(probe, (fits + fails) // 2)
            size = measure(start, probe, number)
            per_row = max(1.0, (size - single) / (probe - 1))
            overshot = size > limit
            if overshot:
                fails = probe
            else:
                fits, fits_bytes = probe, size
            probe = fits + int((limit - fits_bytes) / per_row)
        sizes.append(fits)
        start += fits
        guess = fits
    return sizes
