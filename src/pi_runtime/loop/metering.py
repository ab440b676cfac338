"""What one model call used: the provider's figures, Pi's own count where they are
missing or no count of tokens, and the price."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from ..context import ContextBuilder
from ..messages import AssistantMessage, Usage
from ..models.pricing import cost_usd

_MOST_TOKENS = 10**12


def metered(
    answer: AssistantMessage, counted_input: int, builder: ContextBuilder, model: str
) -> tuple[Usage, Literal["provider", "counted"]]:
    """The call's usage: the provider's figures, Pi's own count for any it left out,
    and its price (`models.pricing`; None when unknown).

    Some servers report nothing (scripted models), or nothing of the input
    (llama-cpp-python's server when streaming): a zero where there must have been
    tokens is taken as unreported. `counted` says at least one figure is Pi's.
    """
    usage = answer.usage
    reported = (usage.input_tokens, usage.output_tokens)
    # a figure that is no count of tokens (a string, a negative, a float) is none
    input_tokens, output_tokens = _figure(reported[0]), _figure(reported[1])
    if input_tokens <= 0:
        input_tokens = counted_input
    if output_tokens <= 0 and answer.content:
        output_tokens = builder.count_answer(answer)
    counted = (input_tokens, output_tokens) != reported
    cached = _figure(usage.cached_tokens)
    if counted or cached != usage.cached_tokens:
        usage = replace(
            usage, input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached
        )
    cost = cost_usd(model, usage)
    if cost != usage.cost_usd:
        usage = replace(usage, cost_usd=cost)
    return usage, "counted" if counted else "provider"


def _figure(value: object) -> int:
    """A usage figure as a provider reported it, if it is a count of tokens; else 0."""
    return value if type(value) is int and 0 <= value <= _MOST_TOKENS else 0


def priced(usage: Usage, model: str) -> Usage:
    """`usage` as reported, with its price when it carries none (`models.pricing`)."""
    if usage.cost_usd is not None:
        return usage
    return replace(usage, cost_usd=cost_usd(model, usage))
