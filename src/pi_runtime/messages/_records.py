"""Frozen dataclasses that build in two thirds of the time: fields set through their slots.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__(self,
name, value)`, the one way past its own `__setattr__` (which refuses). That generic call
looks the attribute up by name and unpacks a fresh argument tuple, for every field of
every instance. A slotted class's field is a descriptor whose `__set__` stores the value
directly: `quick_init` gives the class an `__init__` that calls those, with the same
signature, defaults and default factories. The instance is the same frozen value; only
its construction is cheaper (a turn of the loop builds some twenty of them: events,
messages, tool outcomes).
"""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

__all__ = ["quick_init"]

_T = TypeVar("_T")


class _Factory:
    """The default of an argument whose field has a default factory (as in dataclasses)."""

    def __repr__(self) -> str:
        return "<factory>"


_OMITTED = _Factory()


def quick_init(cls: type[_T]) -> type[_T]:
    """Replaces the `__init__` of a frozen, slotted, keyword-only dataclass (see the module).

    Raises TypeError for any other class, or one whose `__init__` does more than set its
    fields (`__post_init__`, `InitVar`, fields left out of `__init__`).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if "__slots__" not in vars(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} must have slots and no __post_init__")
    every = fields(cls)
    expected = [(f.name, inspect.Parameter.KEYWORD_ONLY) for f in every]
    taken = [(p.name, p.kind) for p in inspect.signature(cls.__init__).parameters.values()]
    if taken[1:] != expected:
        raise TypeError(f"{cls.__name__}.__init__ must take exactly its fields, by keyword")
    namespace: dict[str, Any] = {"_OMITTED": _OMITTED}
    arguments: list[str] = []
    body: list[str] = []
    for field in every:
        name = field.name
        if field.default is not MISSING:
            namespace[f"_default_{name}"] = field.default
            arguments.append(f"{name}=_default_{name}")
        elif field.default_factory is not MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            arguments.append(f"{name}=_OMITTED")
            body.append(f"    if {name} is _OMITTED:\n        {name} = _factory_{name}()")
        else:
            arguments.append(name)
        slot = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
        namespace[f"_set_{name}"] = slot.__set__
        body.append(f"    _set_{name}(self, {name})")
    signature = ", ".join(["self", "*", *arguments] if arguments else ["self"])
    source = f"def __init__({signature}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # as dataclasses makes the `__init__` it replaces
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses to assign a method)
    return cls
