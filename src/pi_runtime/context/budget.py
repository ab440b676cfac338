"""`Budget`: the token budget of each request, and the window it is budgeted for."""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import UserError

DEFAULT_CONTEXT_WINDOW = 128_000
"""The window budgeted for a model that reports none."""

DEFAULT_OUTPUT_RESERVE = 4_096


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Token budget of one request.

    Attributes:
        context_window: tokens the model accepts; None follows the model's own window
            (`context_window_of`), or 128,000 when the model reports none.
        output_reserve: tokens of the window kept free for the answer; None keeps a
            quarter of the window, at most 4,096.
        max_result_tokens: an old tool result longer than this is cut in step 1.
        keep_recent: units (tool round-trips or user turns) never dropped or cut.
        digest_tokens: room the digest of dropped turns may take before summarising.
        digest_consumed: at each new user turn, shrink the tool results of earlier
            answered requests to their digests (proactive compression).
    """

    context_window: int | None = None
    output_reserve: int | None = None
    max_result_tokens: int = 800
    keep_recent: int = 2
    digest_tokens: int = 1_000
    digest_consumed: bool = True

    def __post_init__(self) -> None:
        window, reserve = self.context_window, self.output_reserve
        needs = {
            "context_window": (window is None or window > 0, "positive"),
            "output_reserve": (
                reserve is None or 0 <= reserve < (window or reserve + 1),
                "zero or more, and less than context_window",
            ),
            "max_result_tokens": (
                self.max_result_tokens >= 64,
                "at least 64 (a head and the marker)",
            ),
            "keep_recent": (self.keep_recent >= 0, "zero or more"),
            "digest_tokens": (self.digest_tokens >= 0, "zero or more"),
        }
        for name, (ok, need) in needs.items():
            if not ok:
                raise UserError(f"Budget.{name} must be {need}, got {getattr(self, name)}")

    def window_for(self, model_window: int | None) -> int:
        """The window to budget for, given the one the model reports (None: unknown)."""
        return self.context_window or model_window or DEFAULT_CONTEXT_WINDOW

    def reserve_for(self, window: int) -> int:
        """The output reserve within `window`."""
        if self.output_reserve is not None:
            return self.output_reserve
        return min(DEFAULT_OUTPUT_RESERVE, window // 4)
