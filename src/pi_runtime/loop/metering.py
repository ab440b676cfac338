"""What one model call used: the provider's figures, Pi's own count where they are
missing or no count of tokens, and the price."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from ..context import ContextBuilder
from ..messages import AssistantMessage, Usage, token_figure
from ..models.pricing import cost_usd


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
    input_tokens, output_tokens = token_figure(reported[0]), token_figure(reported[1])
    if input_tokens <= 0:
        input_tokens = counted_input
    if output_tokens <= 0 and answer.content:
        output_tokens = builder.count_answer(answer)
    counted = (input_tokens, output_tokens) != reported
    cached = token_figure(usage.cached_tokens)
    if counted or cached != usage.cached_tokens:
        usage = replace(
            usage, input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached
        )
    cost = cost_usd(model, usage)
    if cost != usage.cost_usd:
        usage = replace(usage, cost_usd=cost)
    return usage, "counted" if counted else "provider"
