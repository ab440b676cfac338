"""Providers' published context windows, by model-name family.

A hosted model's window is not something its API reports, so the adapters look the model
name up here. Families are matched by prefix at a name boundary (`gpt-4o` matches
`gpt-4o-mini` and `gpt-4o-2024-08-06`, not `gpt-4o1`); the longest family wins, and a
vendor prefix such as OpenRouter's `openai/` is ignored. A name no family matches has no
known window (None): the context builder then keeps its default, and an agent that knows
better sets `Budget.context_window`.

Figures are the providers' published input windows (2025). A family whose window changed
between versions is listed only where the current one is known.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["KNOWN_WINDOWS", "known_window"]

KNOWN_WINDOWS: Mapping[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-oss": 131_072,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic: every Claude 3 and later model
    "claude": 200_000,
    # DeepSeek
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}

_BOUNDARIES = ("-", ":", "@")


def known_window(model: str) -> int | None:
    """The published context window of `model` (a provider's model name), or None."""
    name = model.strip().lower().rpartition("/")[2]
    matches = [
        family
        for family in KNOWN_WINDOWS
        if name == family or (name.startswith(family) and name[len(family)] in _BOUNDARIES)
    ]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else None
