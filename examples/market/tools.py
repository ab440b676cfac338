"""Market tools that keep K-lines out of the model's context (seed 004).

    pi run "BNBUSDT 1h 的 MA20/MA50 与 EMA12/EMA26 交叉" \
        --model scripted:examples/market/script.json --tools examples.market.tools:TOOLS

- `compute` takes where the data is (source, symbol, interval, start, end) — or a `klines`
  reference — and the logic; it reads and snapshots the bars server-side, scans them page
  by page, and returns page 1 of the crossovers with the result's reference (`x-ref`),
  the input's (`x-input`) and a summary (`x-summary`) in the header.
- `read_result` reads further pages of a result by cursor (`next` of the page before).
- `read_klines` shows bars to the model, as QRP1 series pages: for looking, not computing.

Data lives in `$PI_MARKET_DB` (a `sqlite:///…` or `postgresql://…` URL) or, unset, in
memory for the life of the process; `$PI_MARKET_OWNER` names whose data it is.
"""

from __future__ import annotations

import os
import threading
from typing import Literal

from pi_runtime import ToolError, tool
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane, Published
from pi_runtime.data.storage import DataStore

from . import source as market
from .indicators import CrossoverScanner, Logic

Interval = Literal["1m", "5m", "15m", "1h", "4h", "1d"]
PAGE_BYTES = 4_000
LOGIC_VERSION = "crossovers-1"
KLINES = "klines"
CROSSOVERS = "crossovers"

_plane: DataPlane | None = None
_lock = threading.Lock()


def plane() -> DataPlane:
    """The tools' data plane, made on first use from the environment."""
    global _plane
    with _lock:
        if _plane is None:
            url = os.environ.get("PI_MARKET_DB")
            store: DataStore
            if url:
                from pi_runtime.durable import open_store

                store = open_store(url)
            else:
                store = MemoryDataStore()
            owner = os.environ.get("PI_MARKET_OWNER", "analyst")
            _plane = DataPlane(store, owner=owner, page_bytes=PAGE_BYTES)
        return _plane


def use_plane(new: DataPlane | None) -> None:
    """Make the tools use `new` (None: made again from the environment on next use)."""
    global _plane
    with _lock:
        _plane = new


def _locator(source: str, symbol: str, interval: str, start: str, end: str) -> dict[str, str]:
    if source not in market.SOURCES:
        raise ToolError(
            f"unknown source {source!r}",
            kind="not_found",
            hint=f"Use one of: {', '.join(market.SOURCES)}.",
        )
    if not symbol or not symbol.isalnum() or len(symbol) > 20:
        raise ToolError(
            f"symbol {symbol!r} must be 1-20 letters or digits, e.g. BNBUSDT",
            kind="invalid_arguments",
        )
    return {"source": source, "symbol": symbol, "interval": interval, "start": start, "end": end}


def _bars(locator: dict[str, str]) -> list[dict[str, object]]:
    try:
        return market.bars(locator["symbol"], locator["interval"], locator["start"], locator["end"])
    except ValueError as exc:
        raise ToolError(
            str(exc),
            kind="invalid_arguments",
            hint="Times are UTC like 2026-09-08T00:00:00Z, start before end, end exclusive.",
        ) from None


def _span(locator: dict[str, object] | None) -> str:
    locator = locator or {}
    return f"{locator.get('start', '')}/{locator.get('end', '')}"


def _snapshot_bars(locator: dict[str, str]) -> Published:
    """Read the bars now and freeze them: a snapshot, its reference, its page 1."""
    bars = _bars(locator)
    return plane().publish(
        bars,
        kind_of=KLINES,
        source=f"{locator['source']}:{locator['symbol']}:{locator['interval']}",
        query=locator,
        sort="time asc",
        version=market.version(),
        kind="series",
        range=_span(dict(locator)),
    )


@tool(max_result_bytes=16_000)
def read_klines(
    source: str,
    symbol: str,
    interval: Interval,
    start: str,
    end: str,
    cursor: str | None = None,
) -> str:
    """Show K-lines (OHLCV bars) as QRP1 series pages. Only to look at bars yourself: to
    compute indicators, call `compute` with the same range — the bars never need to pass
    through you. Page 1 carries `x-ref` (give it to `compute` as `klines`) and `next`.

    Args:
        source: where the bars come from: synthetic.
        symbol: e.g. BNBUSDT.
        interval: bar length.
        start: first bar's open time, UTC, e.g. 2026-09-08T00:00:00Z.
        end: end of the range (exclusive), UTC.
        cursor: the `next` of the previous page, with the same other arguments.
    """
    locator = _locator(source, symbol, interval, start, end)
    if cursor is not None:
        return plane().read(cursor, query=locator, sort="time asc").text
    return _snapshot_bars(locator).first.text


@tool(max_result_bytes=16_000)
def compute(
    logic: Logic,
    fast: int,
    slow: int,
    source: str | None = None,
    symbol: str | None = None,
    interval: Interval | None = None,
    start: str | None = None,
    end: str | None = None,
    klines: str | None = None,
) -> str:
    """Find moving-average crossovers over K-line closes, server-side: give where the bars
    are (source, symbol, interval, start, end) or a `klines` reference, never the bars.
    Returns page 1 of the crossovers (QRP1 table) with `x-summary`, the result's `x-ref`
    and the input's `x-input` (reuse it as `klines` to compare logics on the same bars);
    `next` reads on with `read_result`.

    Args:
        logic: ma_cross (simple averages) or ema_cross (exponential).
        fast: bars in the fast average, e.g. 20.
        slow: bars in the slow average, more than fast, e.g. 50.
        source: where the bars come from: synthetic.
        symbol: e.g. BNBUSDT.
        interval: bar length.
        start: first bar's open time, UTC, e.g. 2026-09-08T00:00:00Z.
        end: end of the range (exclusive), UTC.
        klines: instead of the five above, a reference from read_klines or compute.
    """
    if not 1 <= fast < slow <= 1_000:
        raise ToolError(
            f"need 1 <= fast < slow <= 1000, got fast={fast}, slow={slow}",
            kind="invalid_arguments",
        )
    located = (source, symbol, interval, start, end)
    data = plane()
    if klines is not None:
        if any(part is not None for part in located):
            raise ToolError(
                "give either klines or the locator (source, symbol, interval, start, end)",
                kind="invalid_arguments",
            )
        resolved = data.resolve(klines, kind=KLINES)
        snapshot, input_token = resolved.snapshot, resolved.reference.token
    else:
        if any(part is None for part in located):
            raise ToolError(
                "the locator needs source, symbol, interval, start and end (or give klines)",
                kind="invalid_arguments",
            )
        assert source and symbol and interval and start and end
        locator = _locator(source, symbol, interval, start, end)
        published = _snapshot_bars(locator)
        snapshot, input_token = published.snapshot, published.reference.token
    # Page by page, the averages' windows carried across: the bars stay server-side.
    scanner = CrossoverScanner(logic, fast, slow)
    for segment in data.pages.segments(snapshot):
        scanner.feed(segment)
    published = data.publish(
        scanner.crossovers,
        kind_of=CROSSOVERS,
        source=f"compute:{logic}({fast},{slow})",
        query={"logic": logic, "fast": fast, "slow": slow, "input": snapshot.id},
        sort="time asc",
        version=f"{LOGIC_VERSION}@{snapshot.id}",
        kind="table",
        range=_span(snapshot.locator),
        extra={"x-input": input_token, "x-summary": scanner.summary()},
    )
    return published.first.text


@tool(max_result_bytes=16_000)
def read_result(result: str, cursor: str | None = None) -> str:
    """Read a page of a result by its reference: page 1 without `cursor`, else the page
    the cursor names (the `next` of the page before).

    Args:
        result: the result's reference (`x-ref`), e.g. ref:ref-0a1b2c3d4e5f6789.
        cursor: the `next` of the previous page of this result.
    """
    if cursor is None:
        return plane().first_page(result).text
    return plane().read(cursor, reference=result).text


TOOLS = [compute, read_result, read_klines]
