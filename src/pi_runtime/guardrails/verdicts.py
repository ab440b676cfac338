"""What a guardrail answers: `Allow()`, `Deny(reason)` or `Rewrite(value)`.

A guardrail is any callable, plain or async, that takes the value it guards (the user's
message, the final answer, a tool call's arguments) and returns one of these. Anything
else it returns, and anything it raises, is the guardrail failing: the run fails closed.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the value through unchanged."""

    kind: Literal["allow"] = field(default="allow", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the value; `reason` is recorded, and a tool call's refusal is read by the
    model, so say what rule was broken (not the value itself)."""

    reason: str
    kind: Literal["deny"] = field(default="deny", init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise TypeError(f"Deny needs a reason (a non-empty string), got {self.reason!r}")


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Let `value` through in place of the one checked (the same kind of value: text for
    a message or an answer, an arguments object for a tool call). `reason` is recorded."""

    value: Any
    reason: str = ""
    kind: Literal["rewrite"] = field(default="rewrite", init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise TypeError(f"Rewrite's reason must be a string, got {self.reason!r}")


Verdict: TypeAlias = Allow | Deny | Rewrite
Guardrail: TypeAlias = Callable[[Any], Verdict | Awaitable[Verdict]]
"""A check of one value: `(value) -> Allow | Deny | Rewrite`, or an async function of it.

A plain function runs on the event loop, between the run's steps: keep it quick, and
make one that waits on I/O (a moderation service) `async`."""

NAME_LIMIT = 120


def guardrail_name(guardrail: object) -> str:
    """The name a guardrail is recorded under: its function's name, or its `name`, or its
    class's name (a callable object)."""
    target = getattr(guardrail, "func", guardrail)  # functools.partial
    if inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target):
        name = target.__qualname__
    else:
        own = getattr(guardrail, "name", None)
        name = own if isinstance(own, str) and own else type(guardrail).__name__
    return name[:NAME_LIMIT]
