"""Market tools for the async-job demo (seed 004): a quote answered inline, and a long
moving-average computation that runs as a background job, checkpointing per segment.

    pi run "ACME 的均线交叉统计" --session demo \
        --model scripted:examples/jobs/script.json --tools examples.jobs.tools:TOOLS
    pi worker --once          # runs the job, delivers its result, continues the session
    pi session show demo
"""

from __future__ import annotations

import hashlib
import time

from pi_runtime import tool
from pi_runtime.durable.progress import checkpoint

SEGMENT_DAYS = 20  # days computed between two checkpoints


def close_cents(symbol: str, day: int) -> int:
    """A deterministic synthetic daily close, in cents (integers: resumes are exact)."""
    digest = hashlib.sha256(f"{symbol}:{day}".encode()).digest()
    drift = int.from_bytes(digest[:2], "big") % 601 - 300  # -3.00 … +3.00
    return 10_000 + 40 * (day % 50) + drift


@tool
def quote(symbol: str) -> dict[str, object]:
    """Latest close of a symbol.

    Args:
        symbol: ticker, e.g. ACME.
    """
    return {"symbol": symbol, "close": close_cents(symbol, 0) / 100}


@tool(background=True, timeout_s=600)
def compute(
    symbol: str, days: int = 240, fast: int = 5, slow: int = 20, pause_ms: int = 0
) -> dict[str, object]:
    """Count crossings of a fast and a slow moving average over a symbol's daily closes.
    Long: it runs as a background job and its result arrives when it is done.

    Args:
        symbol: ticker, e.g. ACME.
        days: how many days of closes to scan.
        fast: days in the fast average.
        slow: days in the slow average (more than fast).
        pause_ms: extra time spent per segment (to make the demo's job visibly long).
    """
    if not 0 < fast < slow or days < 1:
        raise ValueError("need 0 < fast < slow and days >= 1")
    progress = checkpoint()
    # The window state of the last committed segment: a restarted job continues there.
    state = progress.state or {"day": 0, "window": [], "above": None, "golden": 0, "death": 0}
    while state["day"] < days:
        end = min(days, state["day"] + SEGMENT_DAYS)
        window, above = list(state["window"]), state["above"]
        golden, death = state["golden"], state["death"]
        for day in range(state["day"], end):
            window = [*window, close_cents(symbol, day)][-slow:]
            if len(window) < slow:
                continue
            now_above = sum(window[-fast:]) * slow > sum(window) * fast
            if above is not None and now_above != above:
                golden, death = golden + now_above, death + (not now_above)
            above = now_above
        if pause_ms:
            time.sleep(pause_ms / 1000)
        state = {"day": end, "window": window, "above": above, "golden": golden, "death": death}
        progress.save(state)
    return {
        "symbol": symbol,
        "days": days,
        "golden_crosses": state["golden"],
        "death_crosses": state["death"],
        "last_close": close_cents(symbol, days - 1) / 100,
    }


TOOLS = [quote, compute]
