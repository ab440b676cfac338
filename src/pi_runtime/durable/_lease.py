"""Holding a lease while work runs: renew it in the background, notice when it is lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .errors import LeaseLost, StoreError

T = TypeVar("T")
log = logging.getLogger("pi_runtime.durable")

# A lease is renewed this many times per period: one slow renewal never loses it.
_RENEWALS_PER_LEASE = 3


class Heartbeat:
    """Renews a lease every third of its length until the block ends.

    `lost` turns True when the store says someone else holds the lease, or when renewals
    kept failing for a whole lease period; `on_lost` is then called once (e.g. to cancel
    the work, which must not write anything more).
    """

    def __init__(
        self, renew: Callable[[], Any], lease_s: float, on_lost: Callable[[], object] | None = None
    ) -> None:
        self._renew = renew
        self._lease_s = lease_s
        self._on_lost = on_lost
        self._task: asyncio.Task[None] | None = None
        self.lost = False

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
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
        self.lost = True
        if self._on_lost is not None:
            self._on_lost()
