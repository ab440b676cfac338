"""Running a coroutine to completion from sync code without waiting on stray threads."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Like `asyncio.run`, but returns as soon as `coro` is done.

    `asyncio.run` joins the default executor on exit, so a sync tool still blocked in a
    worker thread after the run's clock ran out would hold the caller hostage; closing
    the loop ourselves releases the executor without waiting (the thread ends on its own).
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
