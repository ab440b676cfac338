"""Metrics every run reports (seed 000), folded from its events."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ..messages import Block, TextBlock
from .events import Event


def compute_metrics(
    events: Iterable[Event], *, wall_ms: float, count_tokens: Callable[[str], int]
) -> dict[str, Any]:
    """The run's metrics.

    `text_tokens_before_first_tool_call` counts the visible text of every assistant
    message up to and including the first one that calls a tool (0 when no tool was
    called); `mixed_text_tool_message_rate` is the share of tool-calling messages that
    also carry visible text. `time_to_first_token_ms` is when the run's first model
    call produced its first token. Tokens and cost include what child runs (sub-agents)
    spent, as the run's usage does; `child_runs` counts them.
    """
    text_before = 0
    first_tool_ms: float | None = None
    first_token_ms: float | None = None
    calling = mixed = model_calls = tool_calls = truncated = 0
    model_errors = child_runs = 0
    input_tokens = output_tokens = cached_tokens = 0
    cost_usd: float | None = 0.0  # unknown once any call's price is
    errors: Counter[str] = Counter()
    # one pass over every event of the run, most of which count for nothing here: they
    # are passed over by one look-up, the rest of the work is done for the few that count
    for event in events:
        if event.kind not in _COUNTED:
            continue
        if event.kind == "model_response":
            model_calls += 1
            if first_token_ms is None:
                first_token_ms = event.first_token_at_ms
            message = event.message
            usage = message.usage
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
            cached_tokens += usage.cached_tokens
            if cost_usd is not None:
                cost_usd = None if usage.cost_usd is None else cost_usd + usage.cost_usd
            calls = message.tool_calls
            text = _visible_text(message.content)
            if first_tool_ms is None:
                if text:
                    text_before += count_tokens(text)
                if calls:
                    first_tool_ms = event.first_tool_call_at_ms
            if calls:
                calling += 1
                mixed += bool(text)
                truncated += sum(1 for c in calls if c.truncated)
        elif event.kind == "tool_result":
            tool_calls += 1
            if event.is_error and event.error_kind:
                errors[event.error_kind] += 1
        elif event.kind == "model_error":
            model_errors += 1
        elif event.kind == "child_run":
            child_runs += 1
            usage = event.usage
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
            cached_tokens += usage.cached_tokens
            if cost_usd is not None:
                cost_usd = None if usage.cost_usd is None else cost_usd + usage.cost_usd
    if first_tool_ms is None:
        text_before = 0
    return {
        "text_tokens_before_first_tool_call": text_before,
        "time_to_first_tool_call_ms": None if first_tool_ms is None else round(first_tool_ms, 3),
        "mixed_text_tool_message_rate": round(mixed / calling, 4) if calling else 0.0,
        "tool_argument_truncation_count": truncated,
        "time_to_first_token_ms": first_token_ms,
        "model_calls": model_calls,
        "model_errors": model_errors,
        "tool_calls": tool_calls,
        "tool_errors": sum(errors.values()),
        "child_runs": child_runs,
        "errors_by_kind": dict(sorted(errors.items())),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_tokens": cached_tokens,
        "cost_usd": cost_usd,
        "wall_ms": round(wall_ms, 3),
    }


_COUNTED = frozenset({"model_response", "tool_result", "model_error", "child_run"})
"""The kinds of event the metrics count."""


def _visible_text(content: tuple[Block, ...]) -> str:
    if len(content) == 1 and not isinstance(content[0], TextBlock):
        return ""  # a lone tool call, the usual answer mid-run
    return "".join(b.text for b in content if isinstance(b, TextBlock)).strip()
