"""MA and EMA crossovers, computed segment by segment over a snapshot's pages.

Definitions (a direct computation over the whole series gives the same result):

- prices are the closes in cents (integers: sums are exact);
- `ma_cross`: fast MA_i = sum of the last `fast` closes / fast (same for slow), compared
  exactly (`sum_fast · slow` against `sum_slow · fast`);
- `ema_cross`: EMA_i = a · close_i + (1 − a) · EMA_(i−1), a = 2 / (n + 1), started at bar
  n − 1 with the mean of the first n closes;
- both averages exist from bar `slow − 1`; a `golden` cross is a bar where fast is above
  slow and, at the last bar where they differed, it was below (`death`: the reverse);
- reported prices are in currency units, averages rounded to 4 decimals.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

Logic = Literal["ma_cross", "ema_cross"]
LOGICS: tuple[str, ...] = ("ma_cross", "ema_cross")


class _Average:
    """One moving average over the closes fed so far (in cents)."""

    def __init__(self, logic: Logic, period: int) -> None:
        self.logic = logic
        self.period = period
        self.window: deque[int] = deque()
        self.total = 0
        self.ema: float | None = None

    def push(self, cents: int) -> None:
        if self.logic == "ma_cross":
            self.window.append(cents)
            self.total += cents
            if len(self.window) > self.period:
                self.total -= self.window.popleft()
            return
        if self.ema is not None:
            alpha = 2 / (self.period + 1)
            self.ema = alpha * cents + (1 - alpha) * self.ema
            return
        self.window.append(cents)
        self.total += cents
        if len(self.window) == self.period:
            self.ema = self.total / self.period

    @property
    def ready(self) -> bool:
        return len(self.window) == self.period or self.ema is not None

    @property
    def value(self) -> float:
        return self.total / self.period if self.logic == "ma_cross" else float(self.ema or 0)


class CrossoverScanner:
    """Feeds on bars (dicts with `time` and `close`) in order, any number at a time, and
    collects the crossovers; its state carries over from one segment to the next."""

    def __init__(self, logic: Logic, fast: int, slow: int) -> None:
        if logic not in LOGICS:
            raise ValueError(f"logic {logic!r} is not one of {', '.join(LOGICS)}")
        if not 1 <= fast < slow:
            raise ValueError(f"need 1 <= fast < slow, got fast={fast}, slow={slow}")
        self.logic = logic
        self.fast = _Average(logic, fast)
        self.slow = _Average(logic, slow)
        self.side = 0  # +1 fast above slow, -1 below, at the last bar where they differed
        self.bars = 0
        self.last: dict[str, Any] | None = None
        self.crossovers: list[dict[str, Any]] = []

    def _relation(self) -> int:
        if self.logic == "ma_cross":  # exact: integer sums, no division
            left = self.fast.total * self.slow.period
            right = self.slow.total * self.fast.period
            return (left > right) - (left < right)
        fast, slow = self.fast.value, self.slow.value
        return (fast > slow) - (fast < slow)

    def feed(self, bars: list[dict[str, Any]]) -> None:
        for bar in bars:
            cents = round(bar["close"] * 100)
            self.fast.push(cents)
            self.slow.push(cents)
            self.bars += 1
            if not (self.fast.ready and self.slow.ready):
                continue
            relation = self._relation()
            fast, slow = round(self.fast.value / 100, 4), round(self.slow.value / 100, 4)
            self.last = {"time": bar["time"], "close": bar["close"], "fast": fast, "slow": slow}
            if relation and self.side and relation != self.side:
                signal = "golden" if relation > 0 else "death"
                self.crossovers.append(
                    {"time": bar["time"], "signal": signal, "close": bar["close"],
                     "fast": fast, "slow": slow}
                )  # fmt: skip
            if relation:
                self.side = relation

    def summary(self) -> str:
        """One line the model reads instead of the rows."""
        golden = sum(1 for c in self.crossovers if c["signal"] == "golden")
        parts = [
            f"{self.bars} bars",
            f"{len(self.crossovers)} crossovers ({golden} golden, "
            f"{len(self.crossovers) - golden} death)",
        ]
        if self.crossovers:
            c = self.crossovers[-1]
            parts.append(f"last: {c['signal']} at {c['time']}, close {c['close']}")
        if self.last is not None:
            above = "above" if self.side > 0 else "below"
            parts.append(
                f"at {self.last['time']}: fast {self.last['fast']} {above} slow {self.last['slow']}"
            )
        else:
            parts.append(f"too few bars for the slow average ({self.slow.period})")
        return "; ".join(parts)
