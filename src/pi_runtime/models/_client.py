"""One SDK client per model for the model's life, bound to the event loop it runs on.

An SDK client pools keep-alive connections, and those belong to the event loop that
opened them: a client reused on another loop holds the first loop's dead sockets (the
bug `run_sync` showed, since it starts a new loop per run). So a `LoopBoundClient` makes
its client on first use, keeps it while calls come from the same loop, and makes a new
one when the running loop changed.

A client must also close before its loop does, or its sockets leak. Loops have no close
hook, but every well-ended loop (`asyncio.run`, `run_sync`) closes the async generators
still open on it: each client is watched by a parked generator whose `finally` closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)


class LoopBoundClient(Generic[C]):
    """The client `make` returns, made once per event loop and closed by `aclose`."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._client: C | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch: AsyncGenerator[None, None] | None = None

    async def get(self) -> C:
        """The client for the running loop: the current one, or a new one on a new loop."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is not loop:
            # its loop has ended (which closed it) or runs elsewhere: never reuse it here
            self._client = self._watch = None
        if self._client is None:
            client = self._make()
            watch = _close_with_the_loop(client)
            await anext(watch)  # parked: the loop closes it, and so the client, on shutdown
            self._client, self._loop, self._watch = client, loop, watch
        return self._client

    async def aclose(self) -> None:
        """Close the client opened on the running loop; the next `get` opens a new one."""
        watch, loop = self._watch, self._loop
        self._client = self._watch = self._loop = None
        if watch is not None and loop is asyncio.get_running_loop():
            await watch.aclose()


async def _close_with_the_loop(client: _Closable) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a client that fails to close is still gone
            await client.close()
