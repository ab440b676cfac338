"""The wall clock holds against async tools that swallow their cancellation: the run ends
at its deadline and leaves such a tool behind, as it leaves a blocked sync tool's thread."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, Limits, RunResult, ToolResultMessage, tool
from pi_runtime.testing import FunctionModel
from pi_runtime.tools import ToolSpec

HOLD_S = 5.0  # how long the stubborn tool holds out; the run's clock is 1 s


def stubborn_tool(finished: list[int], release: threading.Event | None = None) -> ToolSpec:
    @tool
    async def stubborn(x: int) -> str:
        """Carries on when cancelled, for a while.

        Args:
            x: which call.
        """
        end = time.monotonic() + HOLD_S
        while time.monotonic() < end and not (release and release.is_set()):
            with contextlib.suppress(asyncio.CancelledError):  # refuses to end
                await asyncio.sleep(0.02)
        finished.append(x)
        return "done"

    return stubborn


def calls_then_answers(calls: int) -> FunctionModel:
    def turn(request: Any) -> dict[str, Any]:
        if request.step == 0:
            return {
                "tool_calls": [{"name": "stubborn", "arguments": {"x": i}} for i in range(calls)]
            }
        return {"text": "never reached"}

    return FunctionModel(turn)


def assert_cut_off_by_the_clock(result: RunResult, calls: int) -> None:
    assert (result.status, result.stop_reason) == ("stopped", "wall_clock"), result.error
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert len(answers) == calls
    assert all(a.error is not None and a.error.kind == "cancelled" for a in answers)
    assert result.events[-1].kind == "run_finished"


@pytest.mark.parametrize("calls", [1, 2])
def test_wall_clock_leaves_behind_an_async_tool_that_swallows_cancellation(
    tmp_path: Path, calls: int
) -> None:
    finished: list[int] = []
    release = threading.Event()
    agent = Agent(
        calls_then_answers(calls),
        tools=[stubborn_tool(finished, release)],
        limits=Limits(wall_clock_s=1.0),
        trace_dir=tmp_path,
    )

    async def main() -> tuple[RunResult, list[int]]:
        result = await agent.run("go")
        release.set()
        return result, list(finished)

    result, finished_when_returned = asyncio.run(main())  # teardown waits for the tools

    assert_cut_off_by_the_clock(result, calls)
    assert finished_when_returned == [], "the run waited for a tool that refused to end"
    assert sorted(finished) == list(range(calls))  # left behind, it carried on


@pytest.mark.parametrize("calls", [1, 2])
def test_run_sync_returns_at_the_clock_without_waiting_for_a_stubborn_tool(
    tmp_path: Path, calls: int, caplog: pytest.LogCaptureFixture
) -> None:
    finished: list[int] = []
    agent = Agent(
        calls_then_answers(calls),
        tools=[stubborn_tool(finished)],
        limits=Limits(wall_clock_s=1.0),
        trace_dir=tmp_path,
    )

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        result = agent.run_sync("go")
        gc.collect()

    assert_cut_off_by_the_clock(result, calls)
    assert finished == [], "run_sync waited for a tool that refused to end"
    assert [r.getMessage() for r in caplog.records] == []  # no "destroyed but pending"


def test_a_tool_timeout_leaves_behind_an_async_tool_that_swallows_cancellation(
    tmp_path: Path,
) -> None:
    finished: list[int] = []
    release = threading.Event()
    stubborn = stubborn_tool(finished, release)
    stubborn = dataclasses.replace(stubborn, timeout_s=0.5)

    def turn(request: Any) -> dict[str, Any]:
        if request.step == 0:
            return {"tool_calls": [{"name": "stubborn", "arguments": {"x": 0}}]}
        return {"text": "it timed out"}

    agent = Agent(FunctionModel(turn), tools=[stubborn], trace_dir=tmp_path)

    async def main() -> tuple[RunResult, list[int]]:
        result = await agent.run("go")
        release.set()
        return result, list(finished)

    result, finished_when_returned = asyncio.run(main())

    assert result.status == "completed"
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.error is not None and answer.error.kind == "timeout"
    assert finished_when_returned == [], "the call waited for a tool that refused to end"


def test_a_left_behind_tools_own_timeout_firing_later_still_ends_run_sync_well_formed() -> None:
    # The tool enters `asyncio.timeout` in the run's task (Pi drives a tool's first steps
    # there), refuses its cancellation and is left behind; its own timeout then fires on
    # the run's task, while the run has moved on. run_sync used to raise CancelledError.
    @tool(timeout_s=0.2)
    async def clocked(x: int) -> str:
        """Holds out under a timeout of its own.

        Args:
            x: which call.
        """
        async with asyncio.timeout(0.6):
            end = time.monotonic() + HOLD_S
            while time.monotonic() < end:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0.02)
        return "done"

    @tool
    async def slow(x: int) -> str:
        """Takes its time (the run is here when the stray cancel comes).

        Args:
            x: which call.
        """
        await asyncio.sleep(2.0)
        return "slow done"

    def turn(request: Any) -> dict[str, Any]:
        tools_seen = sum(1 for m in request.messages if m.role == "tool")
        if tools_seen == 0:
            return {"tool_calls": [{"name": "clocked", "arguments": {"x": 1}}]}
        if tools_seen == 1:
            return {"tool_calls": [{"name": "slow", "arguments": {"x": 2}}]}
        return {"text": "finished"}

    agent = Agent(FunctionModel(turn), tools=[clocked, slow], trace_dir=False)
    started = time.monotonic()

    result = agent.run_sync("go")

    assert time.monotonic() - started < HOLD_S
    assert (result.status, result.stop_reason) == ("stopped", "cancelled"), result.error
    calls = [c.id for m in result.messages if m.role == "assistant" for c in m.tool_calls]
    answers = [m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)]
    assert sorted(answers) == sorted(calls)  # every call answered exactly once
    assert result.to_json()
