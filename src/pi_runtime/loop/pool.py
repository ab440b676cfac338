"""The budget the runs of one tree share while they run.

A turn's tool calls run inside a `TurnScope`: what is left of the run's request. Every
child run started in those calls, and every run those children start, draws its model
calls from it, and from the scope of each run above, as it makes them:

- before a call, its counted input is held (`admit`), so that siblings calling their
  models at the same moment see it;
- a call starts only while no scope above its run is overdrawn, the input held for
  calls still running counted: otherwise the run stops with the budget stop reason, as
  a run alone stops once it has spent its budget;
- when the call returns, the hold gives way to what the call really spent (`Hold.spent`).

So the request goes over its budget by at most one model call, plus what the calls
running beside that one spend past their counted input (their output, mostly).

How deep a run is nested is kept here too (`depth`): runs nest at most `MAX_DEPTH` deep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..messages import Usage
from ..models.pricing import cost_usd
from ..tools.scope import RunScope
from . import transitions as t
from ._subagent_rule import MAX_SUBAGENT_DEPTH
from .state import RunState

MAX_DEPTH = MAX_SUBAGENT_DEPTH
"""How deep runs may nest inside each other's tool calls: as deep as agent files may
declare sub-agents, so an agent that delegates to itself stops where a chain would."""

_LOCK = threading.Lock()  # a sync tool's child runs in a thread, with its own loop


@dataclass(slots=True, kw_only=True)
class TurnScope(RunScope):
    """A turn's `RunScope` whose remainder the runs started in its calls share.

    Attributes:
        outer: the scope of the tool call the run itself runs in (None: a top-level
            run); what is drawn from this scope is drawn from that one too, and so on.
        depth: how deep the run is nested: 0 for a top-level run, 1 for its children.
        held_tokens, held_cost: the counted input of model calls running now.
    """

    outer: RunScope | None = None
    depth: int = 0
    held_tokens: int = 0
    held_cost: float = 0.0


def depth_of(scope: RunScope | None) -> int:
    """How deep a run started in a tool call of `scope` is nested (1: a child)."""
    if scope is None:
        return 0
    return scope.depth + 1 if isinstance(scope, TurnScope) else 1


def too_deep(scope: RunScope | None) -> str | None:
    """Why a run may not start in a tool call of `scope` (None: it may)."""
    depth = depth_of(scope)
    if depth <= MAX_DEPTH:
        return None
    return (
        f"runs nest at most {MAX_DEPTH} levels deep inside each other's tool calls, "
        f"and this one would be level {depth}"
    )


def _chain(scope: RunScope | None) -> Iterator[RunScope]:
    while scope is not None:
        yield scope
        scope = scope.outer if isinstance(scope, TurnScope) else None


@dataclass(slots=True)
class Hold:
    """A model call's counted input, held from every scope above its run while it runs;
    a context manager that lets go of it however the call ends."""

    outer: RunScope | None = None
    tokens: int = 0
    cost: float = 0.0
    _done: bool = field(default=False, repr=False)

    def spent(self, usage: Usage) -> None:
        """The call returned, having spent `usage`: draw that in place of the hold."""
        if self.outer is None:
            return  # a top-level run's call: its own guards count it
        with _LOCK:
            self._release()
            for scope in _chain(self.outer):
                if scope.tokens_left is not None:
                    scope.tokens_left -= usage.total_tokens
                if scope.cost_left is not None:  # an unknown price: the spend is unknown
                    cost = usage.cost_usd
                    scope.cost_left = None if cost is None else scope.cost_left - cost

    def _release(self) -> None:
        if self._done:
            return
        self._done = True
        for scope in _chain(self.outer):
            if isinstance(scope, TurnScope):
                scope.held_tokens -= self.tokens
                scope.held_cost -= self.cost

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            with _LOCK:
                self._release()


_UNHELD = Hold(_done=True)
"""The hold of a top-level run's calls: nothing above them to draw from."""


def admit(state: RunState, outer: RunScope | None, tokens: int, model: str) -> Hold | t.Step:
    """A hold on `tokens` of input for the run's next model call, or the budget stop when
    a scope above the run (`outer` and up) is overdrawn, the calls running counted."""
    if outer is None:
        return _UNHELD  # a top-level run: its own guards bound it
    with _LOCK:
        chain = tuple(_chain(outer))
        for scope in chain:
            stop = _overdrawn(state, scope)
            if stop is not None:
                return stop
        price = 0.0
        if any(s.cost_left is not None for s in chain):
            price = cost_usd(model, Usage(input_tokens=tokens)) or 0.0
        for scope in chain:
            if isinstance(scope, TurnScope):
                scope.held_tokens += tokens
                scope.held_cost += price
        return Hold(outer, tokens, price)


def _overdrawn(state: RunState, scope: RunScope) -> t.Step | None:
    """The budget stop when `scope` is spent past zero, the calls running counted."""
    held_tokens, held_cost = 0, 0.0
    if isinstance(scope, TurnScope):
        held_tokens, held_cost = scope.held_tokens, scope.held_cost
    running = ", counting the input of calls still running" if held_tokens else ""
    where = f"the budget shared with run {scope.run_id}"
    if scope.tokens_left is not None and scope.tokens_left < held_tokens:
        over = held_tokens - scope.tokens_left
        return t.finish(state, "token_budget", f"{where} is spent: {over} tokens over{running}")
    if scope.cost_left is not None and scope.cost_left < held_cost:
        over_usd = held_cost - scope.cost_left
        detail = f"{where} is spent: ${over_usd:.6f} over{running}"
        return t.finish(state, "token_budget", detail, guard="cost_budget")
    return None
