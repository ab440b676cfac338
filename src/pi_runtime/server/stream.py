"""Runs that outlive their requests, and their AG-UI event streams.

A request starts its turn with `RunHub.start`: the turn runs as a task of the server,
not of the request, so a client that disconnects mid-stream (or stops waiting for its
JSON) cancels nothing — the run finishes and the session stores it. Each `LiveRun` keeps
its events while it runs; any number of followers replay them and follow the rest
(`follow`), which is also how a later request (a viewer) can watch a live run.
`agui_stream` writes one follower's events as AG-UI server-sent events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from ..durable import Conflict, LeaseLost, NotFound, StoreError, StoreUnavailable
from ..exceptions import UserError
from ..loop import RunResult
from ..messages import ToolResultMessage, escape_line_breaks
from ..observe import ApprovalGranted, ApprovalRejected, Event, RunStarted
from .agui import AguiMapper
from .errors import ApiError

log = logging.getLogger("pi_runtime.server")

EventSink = Callable[[Event], None]
Work = Callable[[EventSink], Coroutine[Any, Any, RunResult]]
Resolve = Callable[[str], Awaitable[ToolResultMessage | None]]
KEEPALIVE_S = 15.0


class LiveRun:
    """One turn running apart from any request: its events so far, and its task."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.run_id: str | None = None
        self.task: asyncio.Task[RunResult] | None = None
        self._followers: list[asyncio.Queue[Event | None]] = []
        self._first = asyncio.Event()

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def publish(self, event: Event) -> None:
        if self.run_id is None and isinstance(event, RunStarted):
            self.run_id = event.run_id
        self.events.append(event)
        for queue in self._followers:
            queue.put_nowait(event)
        self._first.set()

    def _ended(self, task: asyncio.Task[RunResult]) -> None:
        for queue in self._followers:
            queue.put_nowait(None)
        self._first.set()

    async def started(self) -> None:
        """Wait for the first event, or for the end of a run that failed before one."""
        await self._first.wait()

    def failure(self) -> BaseException | None:
        """What the ended task raised (None: it returned, or has not ended)."""
        if self.task is None or not self.task.done() or self.task.cancelled():
            return None
        return self.task.exception()

    async def follow(self, keepalive_s: float | None = None) -> AsyncIterator[Event | None]:
        """Every event of the run, from its first, until it ends; with `keepalive_s`,
        None after each quiet spell that long."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        for seen in self.events:
            queue.put_nowait(seen)
        if self.done:
            queue.put_nowait(None)
        self._followers.append(queue)
        try:
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), keepalive_s)
                except TimeoutError:
                    yield None
                    continue
                if event is None:
                    return
                yield event
        finally:
            self._followers.remove(queue)


class RunHub:
    """The server's live runs: started detached, findable by run id while they run, and
    drained when the server stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[RunResult]] = set()
        self._live: dict[str, LiveRun] = {}

    def start(self, work: Work) -> LiveRun:
        live = LiveRun()

        def publish(event: Event) -> None:
            live.publish(event)
            if isinstance(event, RunStarted) and live.run_id == event.run_id:
                self._live[event.run_id] = live

        task = asyncio.get_running_loop().create_task(work(publish))
        live.task = task
        self._tasks.add(task)

        def ended(task: asyncio.Task[RunResult]) -> None:
            self._tasks.discard(task)
            if live.run_id is not None:
                self._live.pop(live.run_id, None)
            live._ended(task)
            failure = live.failure()
            if failure is not None and api_error(failure).status >= 500:
                # a refusal the caller was answered with (a busy session: 409) is theirs
                log.error("a run failed outside Pi's loop", exc_info=failure)

        task.add_done_callback(ended)
        return live

    def get(self, run_id: str) -> LiveRun | None:
        """The run `run_id` if it is running in this server now."""
        return self._live.get(run_id)

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> None:
        """Let running turns finish within `timeout_s`, then cancel the rest (their leases
        run out and a worker takes them over)."""
        tasks = set(self._tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def api_error(exc: BaseException) -> ApiError:
    """The HTTP answer for what a turn raised."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Conflict):
        return ApiError(409, str(exc), code="session_busy")
    if isinstance(exc, NotFound):
        return ApiError(404, str(exc))
    if isinstance(exc, UserError):
        return ApiError(409, str(exc), code="refused")
    if isinstance(exc, LeaseLost):
        return ApiError(503, "the run was taken over by a worker, which finishes it")
    if isinstance(exc, StoreUnavailable):
        return ApiError(503, "the session store is unavailable; try again", code="unavailable")
    return ApiError(500, "the server failed to run this turn", code="internal_error")


async def result_of(live: LiveRun) -> RunResult:
    """The run's result once it ends (the caller leaving does not cancel it); what it
    raised, as an ApiError."""
    assert live.task is not None
    try:
        return await asyncio.shield(live.task)
    except asyncio.CancelledError:
        if live.task.cancelled():  # the server is stopping, not this request
            raise ApiError(
                503, "the server stopped before the run ended", code="unavailable"
            ) from None
        raise
    except Exception as exc:
        raise api_error(exc) from None


async def agui_stream(
    live: LiveRun,
    mapper: AguiMapper,
    *,
    resolve: Resolve | None = None,
    decided: str | None = None,
    keepalive_s: float = KEEPALIVE_S,
) -> AsyncIterator[str]:
    """The run's events as AG-UI server-sent events, `RUN_STARTED` first and
    `RUN_FINISHED` or `RUN_ERROR` last.

    `resolve` finds a stored tool result by call id: the result of a call a person
    decided (`decided`, or one the continuation's opening events name) is sent as
    `TOOL_CALL_RESULT`, though it was stored before the continuation began.
    """
    encode = _encoder()
    async for event in live.follow(keepalive_s):
        if event is None:
            yield ": keep-alive\n\n"
            continue
        for out in mapper.feed(event):
            yield encode(out)
        if resolve is not None and isinstance(event, ApprovalGranted | ApprovalRejected):
            for out in await _resolved(mapper, resolve, event.tool_call_id):
                yield encode(out)
    assert live.task is not None
    failure = live.failure() if not live.task.cancelled() else asyncio.CancelledError()
    if failure is None:
        result = live.task.result()
        if mapper.run_id is None:
            for out in mapper.begin(result.run_id):
                yield encode(out)
        if resolve is not None and decided is not None:
            for out in await _resolved(mapper, resolve, decided):
                yield encode(out)
        closing = mapper.finish(result)
    else:
        error = api_error(failure)
        closing = mapper.fail(error.message, error.code)
    for out in closing:
        yield encode(out)


def _encoder() -> Callable[[BaseEvent], str]:
    """AG-UI's SSE encoding, with no U+2028, U+2029 or U+0085 left raw: valid in a `data:`
    line, but readers splitting lines as `str.splitlines` does (httpx's `iter_lines`)
    would cut the event's JSON there."""
    encoder = EventEncoder()
    return lambda event: escape_line_breaks(encoder.encode(event))


async def _resolved(mapper: AguiMapper, resolve: Resolve, call_id: str) -> list[BaseEvent]:
    with contextlib.suppress(StoreError):
        message = await resolve(call_id)
        if message is not None:
            return list(mapper.tool_result(message))
    return []
