"""Child runs: a run started inside another run's tool call (a sub-agent) is its child.

Three rules tie them together (the scope they share is `tools.scope`):

- **one budget**: the child's limits are the tighter of its own and what is left of the
  parent's request: tokens, cost and wall clock (`bounded`). The children of one turn
  share that remainder, and draw each model call from it as they make it (`pool`);
- **one bill**: the child's usage is added to the parent's when the tool calls of the
  turn are done, before the parent's guards look (`charged`), and kept on the tool
  result, so a continuation reading the spend back from the conversation counts it;
- **one record**: the child's trace names its parent (`parent_run_id`), and the parent's
  trace has a `child_run` event naming the child's run id and trace.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..messages import Usage
from ..observe import ChildRun, Event
from ..tools import ToolOutcome
from ..tools.scope import CallContext, Charge, RunScope
from .guards import Limits
from .pool import TurnScope, depth_of
from .state import RunState, evolve

if TYPE_CHECKING:
    from .run_result import RunResult

_LEAST_TOKENS = 1
_LEAST_COST = 1e-9
_LEAST_SECONDS = 1e-3
_CLOCK_MARGIN_S = 1.0
"""A child's clock ends a tenth of the parent's remainder early (at most this much), so
the child stops on its own and the parent still hears how it ended."""


def scope_for(
    limits: Limits,
    state: RunState,
    *,
    run_id: str,
    elapsed_s: float,
    outer: RunScope | None = None,
) -> TurnScope:
    """What is left of the request `state` belongs to, for the tool calls about to run;
    `outer` is the scope of the call the run itself runs in."""
    tokens = None
    if limits.token_budget is not None:
        tokens = limits.token_budget - state.request_tokens
    cost = None
    spent = state.request_cost_usd
    if limits.cost_budget is not None and spent is not None:
        cost = limits.cost_budget - spent
    deadline = None
    if limits.wall_clock_s is not None:
        deadline = time.monotonic() + limits.wall_clock_s - elapsed_s
    return TurnScope(
        run_id=run_id,
        tokens_left=tokens,
        cost_left=cost,
        deadline=deadline,
        outer=outer,
        depth=depth_of(outer),
    )


def bounded(limits: Limits, scope: RunScope) -> Limits:
    """`limits` tightened to what is left of the parent's budget in `scope`.

    A parent with nothing left still gives the child the least budget a limit can hold:
    the child then stops at its first guard check, and says so.
    """
    changes: dict[str, object] = {}
    if scope.tokens_left is not None:
        left = max(_LEAST_TOKENS, scope.tokens_left)
        if limits.token_budget is None or left < limits.token_budget:
            changes["token_budget"] = left
    if scope.cost_left is not None:
        cost = max(_LEAST_COST, scope.cost_left)
        if limits.cost_budget is None or cost < limits.cost_budget:
            changes["cost_budget"] = cost
    seconds = scope.seconds_left()
    if seconds is not None:
        seconds = max(_LEAST_SECONDS, seconds - min(_CLOCK_MARGIN_S, seconds / 10))
        if limits.wall_clock_s is None or seconds < limits.wall_clock_s:
            changes["wall_clock_s"] = seconds
    return replace(limits, **changes) if changes else limits  # type: ignore[arg-type]


def report(call: CallContext | None, result: RunResult) -> None:
    """Charge the run `result` ended to the tool call it ran inside, if any."""
    if call is None:
        return
    call.charge(
        result.usage,
        run_id=result.run_id,
        trace=result.trace,
        status=result.status,
        stop_reason=result.stop_reason,
    )


def charged(
    state: RunState, outcomes: tuple[ToolOutcome, ...], charges: list[Charge]
) -> tuple[RunState, tuple[ToolOutcome, ...], list[Event]]:
    """The state with the child runs' usage added, the outcomes with each call's usage on
    its result message, and a `child_run` event per child."""
    calls = state.response.tool_calls if state.response is not None else ()
    names = {c.id: c.name for c in calls}
    per_call: dict[str, Usage] = {}
    total = Usage(cost_usd=0.0)
    events: list[Event] = []
    for charge in charges:
        events.append(
            ChildRun(
                tool_call_id=charge.tool_call_id,
                name=names.get(charge.tool_call_id, ""),
                run_id=charge.run_id,
                trace=charge.trace,
                status=charge.status,
                stop_reason=charge.stop_reason,
                usage=charge.usage,
            )
        )
        per_call[charge.tool_call_id] = per_call.get(charge.tool_call_id, Usage(cost_usd=0.0))
        per_call[charge.tool_call_id] += charge.usage
        total += charge.usage
    outcomes = tuple(
        replace(o, message=replace(o.message, usage=per_call[o.call.id]))
        if o.message is not None and o.call.id in per_call
        else o
        for o in outcomes
    )
    return evolve(state, usage=state.usage + total), outcomes, events
