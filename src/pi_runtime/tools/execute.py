"""Running a checked tool call: the one path for inline calls and background jobs alike.

`execute` injects the runtime parameters (idempotency key, session id), runs the tool
under its timeout, classifies what it raised and retries transient failures with
`backoff` (never a timed-out call of a tool that is not idempotent: it may have taken
effect). A sync tool runs in a daemon thread of its own, so a stuck one neither stalls
the event loop nor holds a process that must exit. An async tool that will not end when
cancelled (it catches the cancellation and goes on) is, after a short grace, left behind
in a task of its own: the run's clock and a tool's timeout hold against it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import random
import threading
import time
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from ..messages import (
    ToolErrorInfo,
    ToolErrorKind,
    hint_for,
    quick_init,
    repair_text,
    tool_error_info,
)
from ._eager import start
from ._leaving import Leaving
from .classify import ErrorClass, classify
from .spec import IDEMPOTENCY_PARAM, SESSION_PARAM, ToolSpec

T = TypeVar("T")


def idempotency_key(session_id: str, tool_call_id: str) -> str:
    """Stable key for one tool call of one session: the same across retries and restarts."""
    seed = repair_text(f"{session_id}\x1f{tool_call_id}")  # ids come from outside
    return f"pi-{hashlib.sha256(seed.encode()).hexdigest()[:40]}"


def call_key(spec: ToolSpec, session_id: str, tool_call_id: str) -> str | None:
    """The idempotency key a call of `spec` gets: none for a tool that is idempotent."""
    return None if spec.idempotent else idempotency_key(session_id, tool_call_id)


def backoff(
    attempt: int, *, base_s: float, max_s: float = 8.0, rng: random.Random | None = None
) -> float:
    """Seconds to wait before retry `attempt` (1-based): exponential with "equal jitter",
    half fixed and half random, capped at `max_s`."""
    ceiling = min(max_s, base_s * 2.0 ** (attempt - 1))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One execution attempt of a tool call."""

    number: int
    duration_ms: float
    error_class: ErrorClass | None = None
    error: ToolErrorInfo | None = None
    retry_in_ms: float | None = None


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """How a call ended: its (converted) value, or the error of its last attempt."""

    value: Any = None
    error: ToolErrorInfo | None = None
    error_class: ErrorClass | None = None
    attempts: tuple[Attempt, ...] = ()


async def execute(
    spec: ToolSpec,
    kwargs: dict[str, Any],
    *,
    key: str | None,
    session_id: str | None,
    convert: Callable[[Any], Any] | None = None,
    scope: Callable[[], AbstractContextManager[Any]] | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
    retry_base_s: float = 0.25,
    retry_max_s: float = 8.0,
    rng: random.Random | None = None,
) -> Execution:
    """Run `spec` with checked `kwargs` until it succeeds or a failure is final.

    Args:
        key, session_id: injected when the tool declares those parameters.
        convert: applied to the value inside the attempt (a sync tool's in its thread,
            under its timeout): a value that cannot be converted is the tool's failure
            (classified like one it raised).
        scope: entered around each attempt (a job's checkpoint scope).
        passthrough: exceptions that are not the tool's to report; they propagate.
    """
    if spec.takes_idempotency_key or spec.takes_session_id:
        kwargs = dict(kwargs)  # the caller's stay as they were
        if spec.takes_idempotency_key:
            kwargs[IDEMPOTENCY_PARAM] = key
        if spec.takes_session_id:
            kwargs[SESSION_PARAM] = session_id
    attempts: list[Attempt] = []
    number = 0
    while True:
        number += 1
        started = time.perf_counter()
        try:
            if scope is None:
                value = await _invoke(spec, kwargs, convert)
            else:
                with scope():
                    value = await _invoke(spec, kwargs, convert)
        except passthrough:
            raise
        except (Exception, SystemExit, GeneratorExit) as exc:
            # an async tool's sys.exit() or stray GeneratorExit (a sync tool's: see
            # `_deliverable`) is its failure: out of here either would end the run or the
            # worker. A KeyboardInterrupt or a cancellation is not the tool's: it propagates
            elapsed = (time.perf_counter() - started) * 1000
            cls, info = classify(exc)
            retry = cls == "transient" and number <= spec.retries
            if isinstance(exc, _Deadline) and not spec.idempotent:
                # cut off mid-call it may have taken effect (a sync tool still runs): another
                # attempt could do its side effect twice, and the model must check first
                retry = False
                info = tool_error_info(
                    info.kind, info.message, hint_for(ToolErrorKind.MISSING_RESULT)
                )
            delay = (
                backoff(number, base_s=retry_base_s, max_s=retry_max_s, rng=rng) if retry else 0.0
            )
            attempts.append(
                Attempt(
                    number=number,
                    duration_ms=elapsed,
                    error_class=cls,
                    error=info,
                    retry_in_ms=delay * 1000 if retry else None,
                )
            )
            if retry:
                await asyncio.sleep(delay)
                continue
            return Execution(error=info, error_class=cls, attempts=tuple(attempts))
        elapsed = (time.perf_counter() - started) * 1000
        attempts.append(Attempt(number=number, duration_ms=elapsed))
        return Execution(value=value, attempts=tuple(attempts))


class _Deadline(TimeoutError):
    """The runtime's own timeout, told apart from a `TimeoutError` the tool raised."""


async def _invoke(
    spec: ToolSpec, kwargs: dict[str, Any], convert: Callable[[Any], Any] | None
) -> Any:
    if spec.is_async:
        value = await _timed(spec, spec.function(**kwargs), leave=True)
        return value if convert is None else convert(value)
    if convert is None:
        return await _timed(spec, in_daemon_thread(spec.function, **kwargs))

    def converted() -> Any:
        return convert(spec.function(**kwargs))

    # converted in the tool's thread, under its deadline: a value slow or endless to
    # convert takes the tool's time, not the event loop's
    return await _timed(spec, in_daemon_thread(converted))


async def _timed(spec: ToolSpec, work: Coroutine[Any, Any, Any], *, leave: bool = False) -> Any:
    """`work` under the tool's timeout; `leave`: an async tool's own coroutine, left behind
    if it refuses a cancellation (see `_leaving`)."""
    timeout = spec.timeout_s
    if timeout is None:
        if not leave:
            return await work
        done, rest = start(work)
        return rest if done else await Leaving(rest)
    # awaited in the caller's task, not a task of its own: no task and no extra loop
    # passes per call; past the timeout the tool is cancelled all the same
    began = asyncio.get_running_loop().time()
    done, rest = start(work)
    if done:
        return rest  # it never waited: there was nowhere a timer could have stopped it
    if leave:
        rest = Leaving(rest)
    deadline = asyncio.timeout_at(began + timeout)
    try:
        async with deadline:
            value = await rest
    except TimeoutError:
        if not deadline.expired():
            raise  # the tool's own TimeoutError: the tool's failure, classified as such
        raise _Deadline(f"{spec.name!r} did not finish within {timeout:g}s") from None
    if deadline.expired():
        # the tool swallowed its cancellation and returned: it still ran past its time
        raise _Deadline(f"{spec.name!r} did not finish within {timeout:g}s")
    return value


async def in_daemon_thread(function: Callable[..., T], /, **kwargs: Any) -> T:
    """`function(**kwargs)` in a thread of its own that never delays the process's exit
    (unlike `asyncio.to_thread`, whose pool is joined at exit): a stuck tool cannot hold
    a draining worker. The caller's context variables are visible in the thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value = context.run(function, **kwargs)
        except BaseException as exc:  # delivered to the awaiting task, whatever it is
            outcome: tuple[Any, BaseException | None] = (None, _deliverable(exc))
        else:
            outcome = (value, None)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name="pi-tool", daemon=True).start()
    return await future


_UNDELIVERABLE = (StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt)


def _deliverable(exc: BaseException) -> BaseException:
    """`exc` as the awaiting task may receive it. A future refuses StopIteration (it would
    never resolve), StopAsyncIteration would end an `async for` around the await, a
    GeneratorExit thrown into a task closes its coroutines instead of reaching the await,
    and a KeyboardInterrupt raised in this thread is no Ctrl-C (only the main thread gets
    those): each is the function's failure, a RuntimeError naming it."""
    if not isinstance(exc, _UNDELIVERABLE):
        return exc
    error = RuntimeError(f"the tool raised {type(exc).__name__}")
    error.__cause__ = exc
    return error
