"""A provider's answer of the wrong shape, said plainly: which field, what came, what was due;
and provider text made fit for an error message (`one_line`).

The SDKs build stream events without validating them, so a server's `"choices": null` or
a tool call named `42` reaches an adapter as it came. The adapters read events as plain
JSON (`plain`) and check each field they use; a field of the wrong shape ends the call
with `malformed`, whose message names the provider and the field and quotes what came
on one line, redacted and clipped. It is not retried: the same server answers the same
request in the same shape.
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import ModelError
from ..messages import clipped, redact, repair_text

__all__ = [
    "MAX_QUOTED_CHARS",
    "described",
    "malformed",
    "one_line",
    "plain",
    "usage_of",
    "wrong",
]

MAX_QUOTED_CHARS = 60
"""What a message quotes of a value the provider sent: enough to recognise it."""

_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),  # before int: True is an int too
    (int, "a number"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def malformed(provider: str, what: str) -> ModelError:
    """The error ending a call whose answer from `provider` has `what` wrong with it."""
    return ModelError(f"{provider} sent a malformed answer: {what}", transient=False)


def wrong(
    provider: str, field: str, value: object, expected: str, *, verb: str = "is"
) -> ModelError:
    """`malformed`, saying that `field` is `value` where `expected` was due."""
    return malformed(provider, f"{field} {verb} {described(value)}, not {expected}")


def described(value: object) -> str:
    """`value` as its JSON kind and a one-line quote: `a number (42)`, `null`."""
    if value is None:
        return "null"
    kind = next((name for cls, name in _KINDS if isinstance(value, cls)), "a value")
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not JSON after all: say only its kind
        return kind
    return f"{kind} ({one_line(text, MAX_QUOTED_CHARS)})"


def one_line(text: str, limit: int = 300) -> str:
    """Provider text as one line of at most `limit` characters, redacted before the cut,
    half a surrogate pair made U+FFFD (a store or exporter would refuse the text)."""
    text = " ".join(redact(repair_text(text)).split())
    return clipped(text, limit)


def plain(event: object) -> object:
    """An SDK's stream event as the JSON it came as (SDK objects dumped, others as is).

    Dumped without the serializer's warnings: a field of the wrong type is the provider's
    doing, reported by the adapter that reads it, not a warning on stderr.
    """
    to_dict = getattr(event, "to_dict", None)
    return to_dict(mode="json", warnings=False) if callable(to_dict) else event


def usage_of(usage: object) -> dict[str, Any]:
    """The usage an event reports; of another shape, none (the run counts the tokens)."""
    return dict(usage) if isinstance(usage, dict) else {}
