"""What a model call cost, in US dollars, from the offline price table `genai-prices` ships.

A model's name says who served it (`openai:gpt-4o`, `anthropic:claude-sonnet-4-5`,
`deepseek:deepseek-chat`, `local`, `scripted:…`). The embedded model is free: 0.0. A
provider's model the table lists is priced from its input, cached-input and output
tokens. Everything else — scripted, replayed and function models, Ollama, a server at a
`--base-url` (its name carries `@URL`), a model the table does not know — is None:
unknown, never 0. The table is read from the installed package, never downloaded, and
imported on the first priced call only, so runs on free models never load it.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from ..messages import Usage

FREE_PREFIXES = ("local",)
"""Models that run on this machine: their price is known, and it is zero."""
PRICED_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "deepseek": "deepseek",
    "openrouter": "openrouter",
}
"""Spec prefix → the price table's provider id."""


def cost_usd(model_name: str | None, usage: Usage) -> float | None:
    """The price of `usage` on the model named `model_name`, or None when unknown."""
    if usage.cost_usd is not None:
        return usage.cost_usd  # the adapter (or a script) knew better
    if not model_name:
        return None
    prefix, _, model = model_name.partition(":")
    if prefix in FREE_PREFIXES:
        return 0.0
    provider = PRICED_PROVIDERS.get(prefix)
    if provider is None or not model or "@" in model:
        return None
    return _price(provider, model, usage.input_tokens, usage.output_tokens, usage.cached_tokens)


@cache
def _table() -> Any:
    try:
        import genai_prices
    except ImportError:  # an install without it prices nothing
        return None
    return genai_prices


def _price(
    provider: str, model: str, input_tokens: int, output_tokens: int, cached: int
) -> float | None:
    prices = _table()
    if prices is None:
        return None
    try:  # the figures are the provider's: a count it cannot price is no price
        usage = prices.Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached
        )
        found = prices.calc_price(usage, model_ref=model, provider_id=provider)
    except (LookupError, ValueError, TypeError):
        return None
    total = float(found.total_price)
    return total if math.isfinite(total) and total >= 0 else None
