"""A deterministic synthetic K-line source: any symbol, any range, the same bars every time.

A bar is a function of (symbol, interval, open time, revision) alone, so a range read
twice — or in pieces — gives the same bars. `REVISION` stands for the source's data
version: a new revision is a corrected history, and snapshots taken before keep the old.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime
from typing import Any

SOURCES = ("synthetic",)
INTERVALS = {
    "1m": 60_000,
    "5m": 300_000,
    "15m": 900_000,
    "1h": 3_600_000,
    "4h": 14_400_000,
    "1d": 86_400_000,
}
MAX_BARS = 50_000
REVISION = 1
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def parse_time(text: str) -> int:
    """Epoch milliseconds of `YYYY-MM-DDTHH:MM:SSZ` (ValueError otherwise)."""
    if not isinstance(text, str) or not _ISO.fullmatch(text):
        raise ValueError(f"{text!r} is not a UTC time like 2026-09-08T00:00:00Z")
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version(*, revision: int | None = None) -> str:
    """The data version a read is taken at now."""
    return f"synthetic-r{REVISION if revision is None else revision}"


def _noise(symbol: str, interval: str, index: int, revision: int) -> tuple[float, ...]:
    digest = hashlib.sha256(f"{symbol}|{interval}|{index}|{revision}".encode()).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "big") / 2**32 for i in range(0, 16, 4))


def _close(symbol: str, interval: str, index: int, revision: int) -> float:
    base = 50 + int.from_bytes(hashlib.sha256(symbol.encode()).digest()[:2], "big") % 950
    wobble = _noise(symbol, interval, index, revision)[0] - 0.5
    level = (
        1
        + 0.08 * math.sin(index / 97.0)
        + 0.03 * math.sin(index / 23.3)
        + 0.012 * math.sin(index / 7.1)
        + 0.004 * wobble
    )
    return round(base * level, 2)


def bars(
    symbol: str, interval: str, start: str, end: str, *, revision: int | None = None
) -> list[dict[str, Any]]:
    """The bars opening in [start, end), oldest first: time, open, high, low, close,
    volume, closed. Raises ValueError for a bad interval, range, or more than MAX_BARS."""
    if interval not in INTERVALS:
        raise ValueError(f"interval {interval!r} is not one of {', '.join(INTERVALS)}")
    revision = REVISION if revision is None else revision
    step = INTERVALS[interval]
    first, last = parse_time(start), parse_time(end)
    if first >= last:
        raise ValueError(f"start {start} must be before end {end}")
    first = -(-first // step) * step  # the first bar opening at or after start
    count = max(0, -(-(last - first) // step))
    if count > MAX_BARS:
        raise ValueError(
            f"{count} bars is more than {MAX_BARS}: narrow the range or widen the interval"
        )
    out = []
    for k in range(count):
        index = first // step + k
        open_ = _close(symbol, interval, index - 1, revision)
        close = _close(symbol, interval, index, revision)
        _, up, down, size = _noise(symbol, interval, index, revision)
        out.append(
            {
                "time": iso(index * step),
                "open": open_,
                "high": round(max(open_, close) * (1 + 0.004 * up), 2),
                "low": round(min(open_, close) * (1 - 0.004 * down), 2),
                "close": close,
                "volume": round(500 + 9500 * size**2, 4),
                "closed": True,
            }
        )
    return out
