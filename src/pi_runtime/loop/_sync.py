"""Running a coroutine to completion from sync code without waiting on stray threads."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

from ..tools import forget_left_behind, left_behind

T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Like `asyncio.run`, but returns as soon as `coro` is done.

    `asyncio.run` joins the default executor on exit, so a sync tool still blocked in a
    worker thread after the run's clock ran out would hold the caller hostage; closing
    the loop ourselves releases the executor without waiting (the thread ends on its own).
    Nor does it wait for an async tool the run left behind because it would not end.

    Ctrl-C is handled as `asyncio.run` handles it: the first cancels `coro` (a run ends
    `cancelled`, its trace closed) and then raises KeyboardInterrupt; a second one
    interrupts at once.
    """
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(coro)
        interrupt = _Interrupt(loop, task)
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupt.count and task.uncancel() == 0:
                raise KeyboardInterrupt from None
            raise
        finally:
            interrupt.restore()
    finally:
        try:
            _cancel_the_rest(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            forget_left_behind(loop)


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending and wait for them, but not for a tool left behind:
    it has refused a cancellation already."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    left = left_behind(loop)
    waited = [t for t in pending if t not in left]
    if waited:
        loop.run_until_complete(asyncio.gather(*waited, return_exceptions=True))


class _Interrupt:
    """While installed, SIGINT cancels `task` (the first) or raises KeyboardInterrupt.

    Installed only in the main thread over Python's default handler, as `asyncio.Runner`
    does: elsewhere (another thread, a handler of the caller's) nothing changes."""

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        self.count = 0
        self._loop, self._task = loop, task
        self._installed = False
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            try:
                signal.signal(signal.SIGINT, self._on_sigint)
            except ValueError:  # an embedded interpreter without signals
                return
            self._installed = True

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1 and not self._task.done():
            self._task.cancel()
            self._loop.call_soon_threadsafe(lambda: None)  # wake a loop waiting in select
            return
        raise KeyboardInterrupt

    def restore(self) -> None:
        # a handler the coroutine installed meanwhile (loop.add_signal_handler) stays
        if self._installed and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
