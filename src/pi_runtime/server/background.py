"""The server's own worker: background jobs delivered without a separate `pi worker`.

It runs on a thread with its own event loop, so its store calls and its thread pool stay
apart from the requests', and a slow job never delays an answer. `pi worker` processes
may serve the same store beside it: every piece of work is claimed under a lease.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from ..durable import Store, Worker

_START_S = 10.0


class WorkerThread:
    """A `Worker` with `slots` slots, running on its own thread until `stop`."""

    def __init__(
        self,
        store: Store,
        *,
        slots: int,
        lease_s: float,
        trace_dir: Path | None,
        drain_s: float,
        name: str,
    ) -> None:
        self.worker = Worker(
            store,
            concurrency=slots,
            lease_s=lease_s,
            trace_dir=trace_dir,
            drain_s=drain_s,
            name=name,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"{name}-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(_START_S)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        await self.worker.run()

    def stop(self, timeout_s: float) -> None:
        """Drain the worker (current work finishes within its drain time) and wait."""
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self.worker.stop)
        self._thread.join(timeout_s)
