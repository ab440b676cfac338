"""Bounded memos: what the runs of one agent would otherwise work out again each time.

Runs of an agent share most of what they start from (the system prompt, the tools'
schemas, the day's runtime block), and a worker serves the sessions of few agents. Each
memo here keeps at most a fixed number of entries, so a process that sees new tools on
every run (an MCP server listing them afresh) never piles them up.

- `Bounded`: a dict of at most `limit` entries; when full, the oldest goes.
- `ByIdentity`: values worked out from objects (a tool's schema dict), found again only
  for the very same objects. It holds them, so their ids cannot pass to new objects.
- `small_texts`: an `lru_cache` that keeps only results whose texts are small; a huge
  prompt is worked out each time and never kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, ParamSpec, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

SMALL_CHARS = 65_536
"""The most text a `small_texts` memo keeps for one call."""


class Bounded(Generic[K, V]):
    """A dict of at most `limit` entries: when full, the oldest goes."""

    __slots__ = ("items", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a bounded memo keeps at least one entry, not {limit}")
        self.limit = limit
        self.items: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self.items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self.items

    def __len__(self) -> int:
        return len(self.items)

    def put(self, key: K, value: V) -> V:
        """Keep `value` under `key` and return it."""
        items = self.items
        if key not in items and len(items) >= self.limit:
            del items[next(iter(items))]
        items[key] = value
        return value


class ByIdentity(Generic[V]):
    """Values worked out from objects, found again only for the very same objects.

    An equal object that is not the same one gets a value of its own: the value was
    worked out from the object as it was, and a dict may since have changed in place.
    `also` adds hashable facts to the key (names, descriptions) that are compared by value.
    """

    __slots__ = ("_kept",)

    def __init__(self, limit: int) -> None:
        self._kept: Bounded[Hashable, tuple[tuple[object, ...], V]] = Bounded(limit)

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, objects: Sequence[object], also: Hashable = None) -> V | None:
        found = self._kept.get((tuple(map(id, objects)), also))
        if found is None or len(found[0]) != len(objects):
            return None
        held, value = found
        for kept, given in zip(held, objects, strict=True):
            if kept is not given:
                return None
        return value

    def put(self, objects: Sequence[object], value: V, also: Hashable = None) -> V:
        """Keep `value` for these very objects (held, so their ids stay theirs)."""
        held = tuple(objects)
        self._kept.put((tuple(map(id, held)), also), (held, value))
        return value


def chars(text: str) -> int:
    """The size of a memo's one text: its length."""
    return len(text)


def small_texts(
    maxsize: int, size: Callable[P, int], *, max_chars: int = SMALL_CHARS
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Memoize a function of texts (least recently used out first), keeping only calls
    whose `size(*args)` is at most `max_chars`: larger ones are worked out every time."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        kept = cast(Callable[P, R], functools.lru_cache(maxsize=maxsize)(function))

        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if size(*args, **kwargs) > max_chars:
                return function(*args, **kwargs)
            return kept(*args, **kwargs)

        return call

    return wrap
