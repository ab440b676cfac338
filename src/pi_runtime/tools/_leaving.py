"""Async tools that will not end when cancelled: given a short grace, then left behind.

An async tool is awaited in the run's own task (`_eager.start`, then `Leaving`). A tool
that catches its cancellation and goes on would hold the run's clock, or its own
timeout, for as long as it likes; so a cancelled tool gets `_GRACE_S` to end, and one
still going by then goes on in a task of its own while the caller gets its cancellation.
A blocked sync tool's daemon thread is left behind the same way. Tools left behind are
held (`left_behind`) until they end, and how they end is retrieved, never reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Generator
from typing import Any

from ._eager import Rest

_GRACE_S = 0.25
"""How long a cancelled async tool may go on (cleaning up, say) before it is left behind."""

_left: set[asyncio.Task[Any]] = set()
"""Tools left behind, still running: held here so that they are not collected mid-way."""


class Leaving:
    """The rest of an async tool's coroutine (after `start`), driven in the caller's task.

    Cancelled, the tool gets `_GRACE_S` to end; one still going by then goes on in a task
    of its own and the caller gets its cancellation now, so a run's clock or a tool's
    timeout does not wait on a tool that catches cancellations. Until a cancellation
    this only passes the tool's waits to the task: no task, no timer per call.
    """

    __slots__ = ("coro", "signal")

    def __init__(self, rest: Rest[Any]) -> None:
        self.coro, self.signal = rest.coro, rest.signal

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, signal = self.coro, self.signal
        send = coro.send
        while True:
            try:
                yield signal  # the task waits on it as if the tool had yielded it
            except GeneratorExit:
                coro.close()
                raise
            except asyncio.CancelledError as cancel:
                return (yield from _wind_down(coro, cancel))
            except BaseException as exc:  # thrown by another driver: the tool's to take
                try:
                    signal = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                signal = send(None)
            except StopIteration as stop:
                return stop.value


def _wind_down(
    coro: Coroutine[Any, Any, Any], cancel: asyncio.CancelledError
) -> Generator[Any, Any, Any]:
    """Throw `cancel` into the tool and wait for it to end, for `_GRACE_S` at most (less
    if cancelled again); then leave it running and raise `cancel`."""
    loop = asyncio.get_running_loop()
    until = loop.time() + _GRACE_S
    thrown: BaseException | None = cancel
    while True:
        try:
            signal = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as stop:
            return stop.value
        thrown = None
        if loop.time() >= until:
            break
        try:
            yield from _wait(loop, signal, until)
        except GeneratorExit:
            coro.close()
            raise
        except BaseException:  # cancelled again: no more grace
            _leave(coro, signal)
            raise
        if signal is not None and not signal.done():
            break
    _leave(coro, signal)
    raise cancel


def _wait(loop: asyncio.AbstractEventLoop, signal: Any, until: float) -> Generator[Any, Any, None]:
    """Wait until `signal` (what the tool waits on) is done, or until `until` at most."""
    if signal is None:  # a bare yield (`sleep(0)`): the tool goes on at the next pass
        yield None
        return
    waiter = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    signal.add_done_callback(wake)
    timer = loop.call_at(until, wake)
    try:
        yield from waiter
    finally:
        timer.cancel()
        signal.remove_done_callback(wake)


def _leave(coro: Coroutine[Any, Any, Any], signal: Any) -> None:
    """Go on running `coro`, waiting on `signal`, in a task of its own."""
    task = asyncio.get_running_loop().create_task(_go_on(Rest(coro, signal)), name="pi-left-tool")
    _left.add(task)
    task.add_done_callback(_settled)


async def _go_on(rest: Rest[Any]) -> Any:
    return await rest


def _settled(task: asyncio.Task[Any]) -> None:
    _left.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: how a tool left behind ends is nobody's to report


def left_behind(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    """The tools `loop` runs that a cancelled call left behind: they refused to end once."""
    return {t for t in tuple(_left) if t.get_loop() is loop}


def forget_left_behind(loop: asyncio.AbstractEventLoop) -> None:
    """Drop the tools left behind on `loop`, now closed: they can never go on. Each is
    closed (its `finally` blocks run) and its task goes without a "destroyed but pending"
    complaint."""
    for task in left_behind(loop):
        if task.done():  # ended, but the loop closed before `_settled` was called
            _settled(task)
            continue
        _left.discard(task)
        task._log_destroy_pending = False  # type: ignore[attr-defined]
        with contextlib.suppress(RuntimeError):  # it awaited on in its `finally`
            task.get_coro().close()
