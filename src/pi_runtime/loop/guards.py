"""Limits of a request and the pure checks that stop it (seed 001 §2.3, seed 000 layer four)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..exceptions import UserError
from ..messages import StopReason

_COUNTS = (
    "max_steps",
    "max_consecutive_errors",
    "loop_window",
    "loop_threshold",
    "no_progress_window",
    "no_progress_repeats",
)
_OPTIONAL_COUNTS = ("token_budget", "max_tool_calls")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Guards and circuit breakers of one user request.

    A request is a user message and everything the agent does to answer it, across the
    continuations of a durable session (each resumes where the last run stopped): the
    counts below are request totals, not per run. Every field is a plain JSON value, so
    limits can be stored with a session and read from an agent file's `[limits]` table.

    Attributes:
        max_steps: model calls allowed.
        token_budget: cumulative input + output tokens allowed (None: unlimited). The
            default, 4,000,000, is the default 20 steps each filling a 200k-token
            context window: no normal run gets near it, while a runaway one (raised step
            limits, huge results re-read turn after turn; seed 001 §8.1) is stopped
            before the bill explodes.
        wall_clock_s: seconds the request may take, model and tool waits included.
        max_consecutive_errors: failed tool calls in a row before the run stops.
        loop_window: how many recent tool calls loop detection looks at.
        loop_threshold: the same call this often inside the window is a loop (A-A-A);
            a sequence of 2+ calls repeated back to back (A-B-A-B) is one too.
        no_progress_window: how many recent outcomes no-progress detection looks at.
        no_progress_repeats: the same call returning the same result this often inside
            the window means the run is not getting anywhere.
        max_tool_calls: tool calls the model may make (None: no limit, the default;
            `max_steps` already bounds calls made one at a time, and a fixed count would
            refuse legitimate parallel fan-out; seed 002 §5.2 uses 4 for a small
            assistant). Calls past it are refused (`tool_limit`) and the next model call
            must answer without tools, told to say what failed. A model that still calls
            tools then has its calls refused and the run stops with `max_steps`: its
            allowance of actions is spent.
        block_repeated_calls: a call identical to the one just before it (same tool,
            same canonical arguments) is not run; the model gets a `repeated_call` error
            asking it to try another way (seed 002 §5.2).
        cost_budget: US dollars the request's model calls may cost (None: unlimited, the
            default). Past it the run stops with `token_budget`, the budget stop reason;
            the guard event names `cost_budget`. Prices come from `models.pricing`; while
            a call's price is unknown (a scripted model, an unlisted server) the spend is
            unknown and this guard cannot trip: give `token_budget` as well for those.
        model_retries: how often a transient model failure is retried before the run
            ends `model_error`.
        retry_base_s: first backoff delay (seconds) for transient tool and model
            failures; each retry doubles it, with jitter.
    """

    max_steps: int = 20
    token_budget: int | None = 4_000_000
    wall_clock_s: float | None = 600.0
    max_consecutive_errors: int = 3
    loop_window: int = 6
    loop_threshold: int = 3
    no_progress_window: int = 20
    no_progress_repeats: int = 3
    max_tool_calls: int | None = None
    block_repeated_calls: bool = True
    cost_budget: float | None = None
    model_retries: int = 2
    retry_base_s: float = 0.25

    def __post_init__(self) -> None:
        for name in _COUNTS + _OPTIONAL_COUNTS:
            value = getattr(self, name)
            if value is None and name in _OPTIONAL_COUNTS:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(f"{name} must be an integer, got {value!r}")
        for name in _COUNTS:
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in _OPTIONAL_COUNTS:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{name} must be positive (or None: no limit), got {value}")
        clock = self.wall_clock_s
        if clock is not None:
            if isinstance(clock, bool) or not isinstance(clock, int | float):
                raise UserError(f"wall_clock_s must be a number of seconds, got {clock!r}")
            if not math.isfinite(clock) or clock <= 0:
                raise UserError(f"wall_clock_s must be positive and finite, got {clock}")
        budget = self.cost_budget
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, int | float):
                raise UserError(f"cost_budget must be a number of US dollars, got {budget!r}")
            if not math.isfinite(budget) or budget <= 0:
                raise UserError(f"cost_budget must be positive and finite, got {budget}")
        retries = self.model_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise UserError(f"model_retries must be an integer >= 0, got {retries!r}")
        base = self.retry_base_s
        if isinstance(base, bool) or not isinstance(base, int | float):
            raise UserError(f"retry_base_s must be a number of seconds, got {base!r}")
        if not math.isfinite(base) or base < 0:
            raise UserError(f"retry_base_s must be finite and 0 or more, got {base}")
        if not isinstance(self.block_repeated_calls, bool):
            raise UserError(
                f"block_repeated_calls must be true or false, got {self.block_repeated_calls!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar: no deep copy needed (`asdict` walks each one, ~20 µs)
        return {name: getattr(self, name) for name in _LIMIT_FIELDS}


_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))


def detect_loop(actions: tuple[str, ...], limits: Limits) -> str | None:
    """A description of the loop at the end of `actions`, or None."""
    window = actions[-limits.loop_window :]
    if len(set(window)) == len(window) and limits.loop_threshold > 1:
        return None  # no call repeats in the window: neither a repeat nor a cycle can
    # a count per distinct call beats building a Counter every turn; the window holds at
    # most carry.KEEP hashes, so this stays small
    times = max(map(window.count, set(window)), default=0)
    if times >= limits.loop_threshold:
        return f"the same call was made {times} times in the last {len(window)} calls"
    for period in range(2, len(window) // 2 + 1):
        if window[-1] != window[-1 - period]:
            continue  # no cycle of this period ends here: spared two slices a period
        tail = window[-2 * period :]
        if tail[:period] == tail[period:] and len(set(tail[:period])) > 1:
            return f"a cycle of {period} calls repeated back to back"
    return None


def detect_no_progress(outcomes: tuple[str, ...], limits: Limits) -> str | None:
    """A description when the same call keeps returning the same result, or None."""
    if not outcomes:
        return None
    last = outcomes[-1]
    times = outcomes[-limits.no_progress_window :].count(last)
    if times >= limits.no_progress_repeats:
        return f"the same call returned the same result {times} times"
    return None


def check_guards(
    *,
    limits: Limits,
    steps: int,
    total_tokens: int,
    cost_usd: float | None = None,
    elapsed_s: float,
    consecutive_errors: int,
    actions: tuple[str, ...],
    outcomes: tuple[str, ...],
) -> tuple[StopReason, str, str] | None:
    """The first guard that stops the run, most specific first, or None to go on:
    (stop reason, what happened, the guard's name)."""
    detail = detect_no_progress(outcomes, limits)
    if detail:
        return "no_progress", detail, "no_progress"
    detail = detect_loop(actions, limits)
    if detail:
        return "loop_detected", detail, "loop_detected"
    # a spent budget before errors in a row: sub-agents stopped by the budget they share
    # fail together, and the budget is why
    if limits.token_budget is not None and total_tokens > limits.token_budget:
        detail = f"{total_tokens} tokens used of a budget of {limits.token_budget}"
        return "token_budget", detail, "token_budget"
    budget = limits.cost_budget
    if budget is not None and cost_usd is not None and cost_usd > budget:
        # no stop reason of its own: the token budget's is the budget one (wire names)
        detail = f"${cost_usd:.6f} spent of a cost budget of ${budget:g}"
        return "token_budget", detail, "cost_budget"
    if consecutive_errors >= limits.max_consecutive_errors:
        detail = f"{consecutive_errors} tool calls failed in a row"
        return "consecutive_errors", detail, "consecutive_errors"
    if limits.wall_clock_s is not None and elapsed_s > limits.wall_clock_s:
        detail = f"{elapsed_s:.1f}s elapsed of {limits.wall_clock_s:g}s"
        return "wall_clock", detail, "wall_clock"
    if steps >= limits.max_steps:
        return "max_steps", f"{steps} model calls made of {limits.max_steps}", "max_steps"
    return None
