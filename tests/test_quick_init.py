"""`quick_init`: a frozen dataclass built through its slots is the same value as one built
by the `__init__` dataclasses writes, and refuses the same misuse."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest
from pydantic import TypeAdapter

from pi_runtime.messages import quick_init
from pi_runtime.observe import Transition, event_from_dict, event_to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class Plain:
    name: str
    count: int = 3
    tags: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Quick:
    name: str
    count: int = 3
    tags: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


def test_quick_init_builds_the_same_values_as_the_dataclass_init() -> None:
    for arguments in ({"name": "a"}, {"name": "b", "count": 0, "tags": {"x": 1}, "note": "n"}):
        quick, plain = Quick(**arguments), Plain(**arguments)
        assert dataclasses.asdict(quick) == dataclasses.asdict(plain)
    assert Quick(name="a") == Quick(name="a")
    step = Transition(source="act", target="reflect", step=2)
    assert hash(step) == hash(Transition(source="act", target="reflect", step=2))

    @quick_init
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    assert Empty() == Empty()


def test_quick_init_calls_a_default_factory_for_each_instance() -> None:
    first, second = Quick(name="a"), Quick(name="b")
    assert first.tags == {} and first.tags is not second.tags


def test_quick_init_keeps_the_instance_frozen_and_replaceable() -> None:
    quick = Quick(name="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.name = "b"  # type: ignore[misc]
    assert dataclasses.replace(quick, count=9) == Quick(name="a", count=9)
    assert copy.deepcopy(quick) == quick
    assert pickle.loads(pickle.dumps(quick)) == quick


def test_quick_init_refuses_arguments_as_the_dataclass_init_does() -> None:
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'name'"):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Quick(name="a", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional argument"):
        Quick("a")  # type: ignore[call-arg]


def test_quick_init_keeps_pydantic_reading_and_writing_the_class() -> None:
    adapter = TypeAdapter(Quick)
    quick = Quick(name="ü", tags={"k": [1]})
    assert adapter.validate_json(adapter.dump_json(quick)) == quick
    event = Transition(source="act", target="reflect", step=2)
    assert (
        event_from_dict({"kind": "transition", "source": "act", "target": "reflect", "step": 2})
        == event
    )
    assert (
        event_to_json(event) == b'{"kind":"transition","source":"act","target":"reflect","step":2}'
    )


def test_quick_init_refuses_a_class_whose_init_does_more_than_set_fields() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value >= 0

    @dataclass(frozen=True, slots=True, kw_only=True)
    class WithInitVar:
        value: int
        scale: InitVar[int] = 1

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Hidden:
        value: int
        derived: int = field(default=0, init=False)

    @dataclass(frozen=True, slots=True)
    class Positional:
        value: int

    @dataclass(slots=True, kw_only=True)
    class Mutable:
        value: int

    @dataclass(frozen=True, kw_only=True)
    class NoSlots:
        value: int

    for cls in (Checked, WithInitVar, Hidden, Positional, Mutable, NoSlots):
        with pytest.raises(TypeError):
            quick_init(cls)
