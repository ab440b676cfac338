"""Holding a lease while work runs: renew it in the background, notice when it is lost
or when the work was cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from ._stops import Stops
from .errors import LeaseLost, StoreError

T = TypeVar("T")
log = logging.getLogger("pi_runtime.durable")

# A lease is renewed this many times per period: one slow renewal never loses it.
_RENEWALS_PER_LEASE = 3


class Heartbeat:
    """Renews a lease every third of its length until the block ends.

    `lost` turns True when the store says someone else holds the lease (or the work was
    stopped), or when renewals kept failing for a whole lease period; `on_lost` is then
    called once (e.g. to cancel the work, which must not write anything more).

    With `stops` and `key`, a cancel of the work is heard at once (see `_stops`), not at
    the next renewal: `stopped` and `lost` turn True and `on_lost` is called. What may
    still be written is then the store's to decide, under the lease.
    """

    def __init__(
        self,
        renew: Callable[[], Any],
        lease_s: float,
        on_lost: Callable[[], object] | None = None,
        *,
        stops: Stops | None = None,
        key: str = "",
    ) -> None:
        self._renew = renew
        self._lease_s = lease_s
        self._on_lost = on_lost
        self._stops = stops
        self._key = key
        self._unwatch: Callable[[], None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.lost = False
        self.stopped = False

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        if self._stops is not None:
            loop = asyncio.get_running_loop()

            def heard() -> None:  # on the stops' thread
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                    loop.call_soon_threadsafe(self._stopped)

            self._unwatch = self._stops.watch(self._key, heard)
        return self

    def _stopped(self) -> None:
        if self.lost or self._task is None or self._task.done():
            return  # over already
        self.stopped = True
        self._task.cancel()
        self._lose()

    def _lose(self) -> None:
        self.lost = True
        if self._on_lost is not None:
            self._on_lost()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
        if self._unwatch is not None:
            self._unwatch()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        last_ok = loop.time()
        while True:
            await asyncio.sleep(self._lease_s / _RENEWALS_PER_LEASE)
            try:
                await asyncio.to_thread(self._renew)
                last_ok = loop.time()
            except LeaseLost:
                break
            except StoreError as exc:
                log.warning("renewing a lease failed: %s", exc)
                if loop.time() - last_ok < self._lease_s:
                    continue
                break
        self._lose()
