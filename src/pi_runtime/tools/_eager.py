"""A coroutine started at once, in the caller's task: most tools finish without waiting.

`start` runs a coroutine up to its first suspension. One that returns before it ever
waits needs no timer: a timeout only acts where a coroutine waits, so arming one for it
would only cost a timer handle, a heap push and a cancellation. One that does wait is
handed back as `Rest`, an awaitable that goes on where it stopped, under the same
deadline, counted from before the first step.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Rest(Generic[T]):
    """The rest of a coroutine that stopped at `signal` (what it yielded to the task)."""

    __slots__ = ("coro", "signal")

    def __init__(self, coro: Coroutine[Any, Any, T], signal: Any) -> None:
        self.coro = coro
        self.signal = signal

    def __await__(self) -> Generator[Any, Any, T]:
        coro, signal = self.coro, self.signal
        while True:
            try:
                yield signal  # the task waits on it as if the coroutine had yielded it
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # the task's cancellation, the coroutine's to take
                try:
                    signal = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                continue
            # resumed: from here on the coroutine's own awaits reach the task directly
            return (yield from coro.__await__())


def start(coro: Coroutine[Any, Any, T]) -> tuple[bool, Any]:
    """(True, value) when `coro` returned without waiting; else (False, `Rest`).

    An exception the coroutine raises before it waits propagates, as an `await` would.
    """
    try:
        signal = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, Rest(coro, signal)
