"""`evolve` makes the state `dataclasses.replace` would, faster."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from pi_runtime.loop.state import RunState, evolve, evolved
from pi_runtime.messages import UserMessage


def test_evolve_makes_the_state_replace_makes() -> None:
    state = RunState(messages=(UserMessage(content="hi"),), steps=3, actions=("a",))
    changes = {"phase": "act", "steps": 4, "error": "x", "pending": ()}

    evolved = evolve(state, **changes)

    assert evolved == replace(state, **changes)  # type: ignore[arg-type]
    assert all(
        getattr(evolved, f.name) is getattr(replace(state, **changes), f.name)  # type: ignore[arg-type]
        for f in fields(RunState)
        if f.name not in changes
    )
    assert state.phase == "observe" and state.steps == 3  # the old state is untouched


def test_evolve_refuses_a_field_the_state_does_not_have() -> None:
    with pytest.raises(TypeError, match="'stpes'"):
        evolve(RunState(), stpes=1)


def test_an_evolved_state_is_still_frozen() -> None:
    with pytest.raises(AttributeError):
        evolve(RunState(), steps=1).steps = 2  # type: ignore[misc]


def test_evolved_takes_its_changes_as_a_dict_and_checks_them_alike() -> None:
    state = RunState(steps=3, actions=("a",))

    assert evolved(state, {"phase": "act", "steps": 4}) == evolve(state, phase="act", steps=4)
    with pytest.raises(TypeError, match="'stpes'"):
        evolved(state, {"stpes": 1})
