"""What a running tool call knows of the run that made it, and what it reports back.

A tool that runs an agent of its own (a sub-agent) must stay inside what is left of the
calling run's budget, and the model calls it makes must be counted in that run. The
driver opens a `RunScope` while a turn's tool calls run; the gate marks which call is
running (`calling`). A run started inside (`current_call()` is not None) bounds its
limits by the scope and, when it ends, reports a `Charge`: its usage, its run id and
trace. The driver adds the charges to the calling run's usage before its guards look.

Context variables carry both, so they reach async tools, sync tools in their threads and
concurrent calls, each call seeing its own id.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from ..messages import Usage

__all__ = ["CallContext", "Charge", "RunScope", "calling", "current_call", "run_scope"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Charge:
    """Model usage spent inside one tool call (a child run), for the calling run to count.

    Attributes:
        tool_call_id: the call it was spent in.
        usage: tokens and cost of the child's model calls.
        run_id: the child run's id; trace: its JSONL trace, when it wrote one.
        status, stop_reason: how the child run ended.
    """

    tool_call_id: str
    usage: Usage
    run_id: str | None = None
    trace: str | None = None
    status: str | None = None
    stop_reason: str | None = None


@dataclass(slots=True, kw_only=True)
class RunScope:
    """What is left of a run's budget while its tool calls run, and what they spent.

    Attributes:
        run_id: the calling run.
        tokens_left: tokens its request may still use (None: no token budget).
        cost_left: US dollars it may still spend (None: no cost budget, or unknown spend).
        deadline: when its wall clock runs out, on `time.monotonic()` (None: no limit).
        charges: what child runs reported, in the order they ended.
    """

    run_id: str
    tokens_left: int | None = None
    cost_left: float | None = None
    deadline: float | None = None
    charges: list[Charge] = field(default_factory=list)

    def seconds_left(self) -> float | None:
        """Seconds until the deadline (negative once past it); None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()


@dataclass(frozen=True, slots=True)
class CallContext:
    """The tool call running now, inside its run's scope."""

    scope: RunScope
    tool_call_id: str

    def charge(
        self,
        usage: Usage,
        *,
        run_id: str | None = None,
        trace: str | None = None,
        status: str | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """Report usage spent in this call to the calling run."""
        self.scope.charges.append(
            Charge(
                tool_call_id=self.tool_call_id,
                usage=usage,
                run_id=run_id,
                trace=trace,
                status=status,
                stop_reason=stop_reason,
            )
        )


_RUN: ContextVar[RunScope | None] = ContextVar("pi_run_scope", default=None)
_CALL: ContextVar[str | None] = ContextVar("pi_tool_call", default=None)


class run_scope:  # lower case: used like the function it replaced
    """Make `scope` the calling run's while the block runs its tool calls.

    A class, not a `@contextmanager` generator: entered once per turn, and a generator
    context costs three times as much to enter and leave.
    """

    __slots__ = ("_scope", "_token")
    _token: Token[RunScope | None]

    def __init__(self, scope: RunScope) -> None:
        self._scope = scope

    def __enter__(self) -> RunScope:
        self._token = _RUN.set(self._scope)
        return self._scope

    def __exit__(self, *exc: object) -> None:
        _RUN.reset(self._token)


class calling:  # lower case: used like the function it replaced
    """Mark tool call `tool_call_id` as running while the block runs it (entered once
    per tool call: a class for the same reason as `run_scope`)."""

    __slots__ = ("_id", "_token")
    _token: Token[str | None]

    def __init__(self, tool_call_id: str) -> None:
        self._id = tool_call_id

    def __enter__(self) -> None:
        self._token = _CALL.set(self._id)

    def __exit__(self, *exc: object) -> None:
        _CALL.reset(self._token)


def current_call() -> CallContext | None:
    """The tool call this code runs inside, or None (not inside a run's tool call)."""
    scope, call = _RUN.get(), _CALL.get()
    if scope is None or call is None:
        return None
    return CallContext(scope, call)
