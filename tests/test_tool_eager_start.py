"""A tool's coroutine starts at once in the caller's task; one that waits goes on as `Rest`."""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import pytest

from pi_runtime.messages import ToolCall
from pi_runtime.tools import Gate, tool
from pi_runtime.tools._eager import Rest, start

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("_VAR", default="unset")


async def _no_wait() -> str:
    return "now"


async def _fails_at_once() -> str:
    raise ValueError("bad input")


def test_a_coroutine_that_never_waits_is_done_after_its_first_step() -> None:
    assert start(_no_wait()) == (True, "now")


def test_an_error_before_the_first_wait_propagates_from_start() -> None:
    with pytest.raises(ValueError, match="bad input"):
        start(_fails_at_once())


def test_the_rest_of_a_waiting_coroutine_runs_in_the_same_task_and_context() -> None:
    seen: list[Any] = []

    async def waits_twice() -> str:
        seen.append((asyncio.current_task(), _VAR.get()))
        await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        seen.append((asyncio.current_task(), _VAR.get()))
        return "later"

    async def scenario() -> tuple[str, asyncio.Task[Any] | None]:
        _VAR.set("caller's")
        done, rest = start(waits_twice())
        assert not done and isinstance(rest, Rest)
        return await rest, asyncio.current_task()

    value, task = asyncio.run(scenario())

    assert value == "later"
    assert seen == [(task, "caller's"), (task, "caller's")]


def test_a_cancellation_reaches_the_coroutine_where_it_waits() -> None:
    async def takes_it() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # it may still wait while it cleans up
            return "cleaned up"
        return "never"

    async def lets_it_through() -> str:
        await asyncio.sleep(30)
        return "never"

    async def scenario() -> tuple[str, bool]:
        _, taken = start(takes_it())
        _, passed = start(lets_it_through())
        first = asyncio.ensure_future(_await(taken))
        second = asyncio.ensure_future(_await(passed))
        await asyncio.sleep(0.01)
        first.cancel()
        second.cancel()
        value = await first
        with pytest.raises(asyncio.CancelledError):
            await second
        return value, second.cancelled()

    assert asyncio.run(scenario()) == ("cleaned up", True)


async def _await(rest: Any) -> Any:
    return await rest


def test_an_abandoned_rest_closes_its_coroutine() -> None:
    closed: list[bool] = []

    async def holds_a_resource() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            closed.append(True)

    async def scenario() -> None:
        _, rest = start(holds_a_resource())
        waiter = rest.__await__()
        next(waiter)  # the task would now wait on the sleep's future
        waiter.close()

    asyncio.run(scenario())

    assert closed == [True]


def test_a_tool_that_blocks_then_waits_past_its_timeout_reports_timeout() -> None:
    @tool(timeout_s=0.05, retries=0)
    async def blocks_first(x: int) -> str:
        time.sleep(0.1)  # holds the loop past its whole deadline before it first waits
        await asyncio.sleep(30)
        return "never"

    gate = Gate([blocks_first], session_id="s")
    call = ToolCall(id="c1", name="blocks_first", raw='{"x": 1}', arguments={"x": 1})
    outcome = asyncio.run(gate.run(call))

    assert outcome.message is not None and outcome.message.error is not None
    assert outcome.message.error.kind == "timeout"
