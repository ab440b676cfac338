"""Being told at once that held work was stopped elsewhere (a cancel), instead of at the
holder's next lease renewal (a third of the lease: 10 s by default).

A transaction that cancels a running run or job names it (`Tx.stop`): at its commit,
PostgreSQL sends `NOTIFY pi_stop, 'run:ID'` (or `job:ID`), and the store that made it
tells its own holders directly. One thread per store and process serves every holder:
on PostgreSQL it `LISTEN`s on one connection of its own (the worker's `pi_work` watch,
another channel); on SQLite, which has no such channel, it reads which held rows were
cancelled, a few times a second, only while something is held. Nothing is read or
written per model call or per tool call.

A notice only wakes the holder, which cancels its work: what may then be written is
decided by the store under the lease (`finish_cancelled_run`), never by the notice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ._tx import STOP_CHANNEL as STOP_CHANNEL
from .errors import StoreError

log = logging.getLogger("pi_runtime.durable")

POLL_S = 0.2  # SQLite: how often held rows are read; PostgreSQL: the longest listen
_LINGER_S = 5.0  # the thread (and its connection) outlives the last holder this long
_RECENT = 4096  # stops remembered, for a holder that starts watching just after one


def run_key(run_id: str) -> str:
    return f"run:{run_id}"


def job_key(job_id: str) -> str:
    return f"job:{job_id}"


class Listener(Protocol):
    """A `LISTEN` on the stop channel (`_watch.PgWatch`)."""

    def notices(self, timeout_s: float) -> list[str]: ...

    def close(self) -> None: ...


Stopped = Callable[[Sequence[str]], Iterable[str]]
"""Which of the given keys name a row that was cancelled (one read transaction)."""


class Stops:
    """Tells this process's holders of runs and jobs that theirs was cancelled.

    Args:
        stopped: reads which held keys were cancelled (on connecting a listener, and on
            every poll without one).
        listen: opens a listener (PostgreSQL); None: poll with `stopped` (SQLite).
        poll_s: the poll period, or the longest single listen.
    """

    def __init__(
        self, stopped: Stopped, listen: Callable[[], Listener] | None, poll_s: float = POLL_S
    ) -> None:
        self._stopped = stopped
        self._listen = listen
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._held: dict[str, list[Callable[[], object]]] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._idle_until = 0.0

    def watch(self, key: str, on_stop: Callable[[], object]) -> Callable[[], None]:
        """Call `on_stop` (from another thread) once `key`'s row is cancelled; returns
        the function that stops watching."""
        with self._lock:
            if key in self._recent:
                stopped_already = True
            else:
                stopped_already = False
                self._held.setdefault(key, []).append(on_stop)
                if self._thread is None and not self._closed.is_set():
                    self._thread = threading.Thread(
                        target=self._serve, name="pi-stops", daemon=True
                    )
                    self._thread.start()
        if stopped_already:
            on_stop()

        def unwatch() -> None:
            with self._lock:
                callbacks = self._held.get(key)
                if callbacks is not None and on_stop in callbacks:
                    callbacks.remove(on_stop)
                    if not callbacks:
                        del self._held[key]

        return unwatch

    def heard(self, keys: Iterable[str]) -> None:
        """`keys` were cancelled: tell their holders (each once)."""
        called: list[Callable[[], object]] = []
        with self._lock:
            for key in keys:
                self._recent[key] = None
                self._recent.move_to_end(key)
                called += self._held.pop(key, [])
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
        for on_stop in called:
            try:
                on_stop()
            except Exception:  # one holder's callback must not silence the others
                log.exception("telling a holder its work was cancelled failed")

    def close(self) -> None:
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * self._poll_s + 1)

    def _keys(self) -> list[str] | None:
        """The held keys; None when the thread should end (closed, or idle too long)."""
        with self._lock:
            if self._closed.is_set() or (not self._held and time.monotonic() > self._idle_until):
                self._thread = None
                return None
            if self._held:
                self._idle_until = time.monotonic() + _LINGER_S
            return list(self._held)

    def _serve(self) -> None:
        self._idle_until = time.monotonic() + _LINGER_S
        listener: Listener | None = None
        try:
            while (keys := self._keys()) is not None:
                try:
                    if self._listen is None:
                        if keys:
                            self.heard(self._stopped(keys))
                        self._closed.wait(self._poll_s)
                        continue
                    if listener is None:
                        listener = self._listen()
                        if keys:  # cancelled before the listen began: read, once
                            self.heard(self._stopped(keys))
                    self.heard(listener.notices(self._poll_s))
                except StoreError as exc:
                    log.warning("watching for cancelled work: %s", exc)
                    if listener is not None:
                        with contextlib.suppress(StoreError):
                            listener.close()
                        listener = None
                    self._closed.wait(self._poll_s)
        finally:
            if listener is not None:
                with contextlib.suppress(StoreError):
                    listener.close()
