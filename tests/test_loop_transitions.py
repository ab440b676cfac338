"""REFLECT goes on through OBSERVE to THINK when nothing is pending: the same state and
the same transition events as taking the two steps one by one."""

from __future__ import annotations

from pi_runtime.loop import Limits
from pi_runtime.loop import transitions as t
from pi_runtime.loop.state import RunState, evolve
from pi_runtime.messages import UserMessage
from pi_runtime.observe import Transition

LIMITS = Limits(max_steps=10, wall_clock_s=None, token_budget=None)


def test_reflect_with_nothing_pending_ends_where_observe_would_take_it() -> None:
    state = RunState(phase="reflect", messages=(UserMessage(content="go"),), steps=2, anchor=0)

    reflected, events = t.reflect(state, LIMITS, 0.0)

    observed, observe_events = t.observe(evolve(state, phase="observe"))
    assert reflected == observed and reflected.phase == "think"
    assert events == [
        Transition(source="reflect", target="observe", step=2),
        *observe_events,
    ]
    assert observe_events == [Transition(source="observe", target="think", step=2)]


def test_reflect_stops_at_observe_when_there_is_something_to_take_in() -> None:
    notice = UserMessage(content="no more tools", origin="tool_limit")
    waiting = RunState(phase="reflect", pending=(notice,), steps=1)

    reflected, events = t.reflect(waiting, LIMITS, 0.0)

    assert reflected.phase == "observe" and reflected.pending == (notice,)
    assert events == [Transition(source="reflect", target="observe", step=1)]


def test_reflect_out_of_tool_calls_still_tells_the_model_through_observe() -> None:
    used_up = RunState(phase="reflect", steps=1, tool_calls=2)

    reflected, events = t.reflect(used_up, Limits(max_tool_calls=2), 0.0)

    assert reflected.phase == "observe" and reflected.next_tool_choice == "none"
    assert len(reflected.pending) == 1 and reflected.tool_limit_notice
    assert events == [Transition(source="reflect", target="observe", step=1)]
