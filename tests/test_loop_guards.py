"""Every way a run can stop ends in a well-formed `RunResult` with the exact reason.

Each scenario scripts a model, runs the agent and checks three things the contract
promises: the status and stop reason, that every tool call has exactly one tool result
under its id (so the conversation can be sent to any provider again), and the event that
explains the ending.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import pi_runtime
from pi_runtime import (
    Agent,
    AssistantMessage,
    Limits,
    ModelError,
    RunResult,
    SecurityViolation,
    ToolError,
    ToolResultMessage,
    UnrecoverableError,
    tool,
)
from pi_runtime.loop import detect_loop
from pi_runtime.testing import FunctionModel, ScriptedModel, function_call, text


def assert_every_call_answered_once(result: RunResult) -> None:
    """Each tool call in the conversation has exactly one tool result with its id."""
    call_ids = [
        c.id for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    result_ids = Counter(
        m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)
    )
    assert len(call_ids) == len(set(call_ids)), "tool call ids must be unique"
    assert set(result_ids) == set(call_ids)
    assert all(n == 1 for n in result_ids.values()), result_ids


def guard_events(result: RunResult) -> list[Any]:
    return [e for e in result.events if e.kind == "guard"]


def assert_stopped_by(result: RunResult, reason: str) -> None:
    assert (result.status, result.stop_reason) == ("stopped", reason), result.error
    assert result.output is None
    assert [e.guard for e in guard_events(result)] == [reason]
    assert_every_call_answered_once(result)


def tool_results(result: RunResult) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


@tool
def check(item: str) -> str:
    """Check an item's status; it never changes.

    Args:
        item: the item to check.
    """
    return "unchanged"


def counting_tool() -> Any:
    """A `ping` tool whose result differs on every call, so no-progress cannot fire."""
    counter = count(1)

    @tool
    def ping(target: str) -> str:
        """Ping a target.

        Args:
            target: host to ping.
        """
        return f"reply #{next(counter)} from {target}"

    return ping


# --- guards -------------------------------------------------------------------------------


def test_max_steps_stops_the_run_after_the_allowed_model_calls(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("lookup", {"key": "a"}),
            function_call("lookup", {"key": "b"}),
            function_call("lookup", {"key": "c"}),
            text("done"),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path, limits=Limits(max_steps=2))

    result = agent.run_sync("look things up")

    assert_stopped_by(result, "max_steps")
    assert result.steps == 2
    assert len(model.requests) == 2
    assert len(tool_results(result)) == 2


def test_token_budget_stops_the_run_once_cumulative_usage_exceeds_it(tmp_path: Path) -> None:
    usage = {"input_tokens": 60, "output_tokens": 10}
    model = ScriptedModel(
        [
            function_call("lookup", {"key": "a"}, usage=usage),
            function_call("lookup", {"key": "b"}, usage=usage),
            text("done"),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path, limits=Limits(token_budget=100))

    result = agent.run_sync("look things up")

    assert_stopped_by(result, "token_budget")
    # 70 tokens after the first call is within budget; 140 after the second is not.
    assert result.steps == 2
    assert result.usage.input_tokens == 120
    assert result.usage.output_tokens == 20


def test_wall_clock_stops_a_model_call_that_takes_too_long(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("lookup", {"key": "a"}),
            text("never delivered", delay_ms=60_000),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path, limits=Limits(wall_clock_s=0.3))

    result = agent.run_sync("look it up")

    assert_stopped_by(result, "wall_clock")
    assert result.steps == 1  # the slow second call never completed
    assert not any(
        isinstance(m, AssistantMessage) and m.text == "never delivered" for m in result.messages
    )
    assert len(tool_results(result)) == 1


def test_wall_clock_gives_the_unanswered_tool_call_a_cancelled_result(tmp_path: Path) -> None:
    finished: list[str] = []

    @tool
    async def slow_report(region: str) -> str:
        """Build a report that takes a long time.

        Args:
            region: the region to report on.
        """
        await asyncio.sleep(60)
        finished.append(region)
        return "report"

    model = ScriptedModel([function_call("slow_report", {"region": "north"}), text("done")])
    agent = Agent(model, tools=[slow_report], trace_dir=tmp_path, limits=Limits(wall_clock_s=0.3))

    result = agent.run_sync("report on the north")

    assert_stopped_by(result, "wall_clock")
    assert finished == []
    [answer] = tool_results(result)
    assert answer.tool_call_id == "call_0_0"
    assert answer.is_error
    assert answer.error is not None and answer.error.kind == "cancelled"
    assert json.loads(answer.content)["kind"] == "cancelled"
    assert isinstance(result.messages[-1], ToolResultMessage)


def test_wall_clock_does_not_wait_for_a_blocked_sync_tool(tmp_path: Path) -> None:
    # Sync tools run in a worker thread, which cannot be cancelled. The run must still end
    # at its wall clock instead of waiting for the thread when the event loop shuts down.
    release = threading.Event()
    finished: list[str] = []

    @tool
    def export_table(table: str) -> str:
        """Export a table; blocks until the backend answers.

        Args:
            table: the table to export.
        """
        release.wait(timeout=5)
        finished.append(table)
        return "exported"

    model = ScriptedModel([function_call("export_table", {"table": "orders"}), text("done")])
    agent = Agent(model, tools=[export_table], trace_dir=tmp_path, limits=Limits(wall_clock_s=0.3))

    try:
        result = agent.run_sync("export the orders")
        returned_while_tool_blocked = finished == []
    finally:
        release.set()

    assert_stopped_by(result, "wall_clock")
    [answer] = tool_results(result)
    assert answer.error is not None and answer.error.kind == "cancelled"
    assert returned_while_tool_blocked, "run_sync waited for the blocked tool thread"


def test_consecutive_errors_stop_the_run_after_three_failed_calls(tmp_path: Path) -> None:
    @tool
    def find_order(order_id: str) -> str:
        """Find an order.

        Args:
            order_id: the order's id.
        """
        raise ToolError(f"no order {order_id}", kind="not_found")

    model = ScriptedModel(
        [
            function_call("find_order", {"order_id": "A-1"}),
            function_call("find_order", {"order_id": "A-2"}),
            function_call("find_order", {"order_id": "A-3"}),
            function_call("find_order", {"order_id": "A-4"}),
            text("done"),
        ]
    )
    agent = Agent(model, tools=[find_order], trace_dir=tmp_path)

    result = agent.run_sync("find my order")

    assert_stopped_by(result, "consecutive_errors")
    assert result.steps == 3
    results = tool_results(result)
    assert [m.is_error for m in results] == [True, True, True]
    assert {m.error.kind for m in results if m.error} == {"not_found"}


def test_a_success_resets_the_consecutive_error_count(tmp_path: Path) -> None:
    @tool
    def flaky(n: int) -> str:
        """Fails for odd numbers.

        Args:
            n: a number.
        """
        if n % 2:
            raise ToolError(f"{n} is odd")
        return f"{n} is even"

    model = ScriptedModel(
        [
            function_call("flaky", {"n": 1}),
            function_call("flaky", {"n": 3}),
            function_call("flaky", {"n": 4}),
            function_call("flaky", {"n": 5}),
            function_call("flaky", {"n": 7}),
            text("finished"),
        ]
    )
    agent = Agent(model, tools=[flaky], trace_dir=tmp_path)

    result = agent.run_sync("try numbers")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert guard_events(result) == []


def test_loop_detection_catches_the_same_call_three_times(tmp_path: Path) -> None:
    ping = counting_tool()
    model = ScriptedModel([function_call("ping", {"target": "db"})] * 4 + [text("done")])
    # with the breaker off every call runs: the guard alone must catch the loop
    limits = Limits(block_repeated_calls=False)
    agent = Agent(model, tools=[ping], trace_dir=tmp_path, limits=limits)

    result = agent.run_sync("is the db up?")

    assert_stopped_by(result, "loop_detected")
    assert result.steps == 3
    # Results differed every time, so this was a loop, not a lack of progress.
    contents = [m.content for m in tool_results(result)]
    assert len(set(contents)) == 3


def test_loop_detection_ignores_argument_spelling(tmp_path: Path) -> None:
    ping = counting_tool()
    model = ScriptedModel(
        [
            function_call("ping", '{"target": "db"}'),
            function_call("ping", '{ "target" :"db" }'),
            function_call("ping", {"target": "db"}),
            text("done"),
        ]
    )
    agent = Agent(model, tools=[ping], trace_dir=tmp_path)

    result = agent.run_sync("is the db up?")

    assert_stopped_by(result, "loop_detected")
    assert result.steps == 3


def test_loop_detection_catches_an_a_b_a_b_cycle(tmp_path: Path) -> None:
    ping = counting_tool()
    a = function_call("ping", {"target": "db"})
    b = function_call("ping", {"target": "cache"})
    model = ScriptedModel([a, b, a, b, a, text("done")])
    agent = Agent(model, tools=[ping], trace_dir=tmp_path)

    result = agent.run_sync("check the services")

    assert_stopped_by(result, "loop_detected")
    assert result.steps == 4
    assert "cycle" in (result.error or "")


def test_loop_detection_sees_repeats_and_cycles_but_not_distinct_calls() -> None:
    limits = Limits(loop_window=6, loop_threshold=3)
    assert detect_loop(("a", "b", "c", "d", "e", "f"), limits) is None
    assert detect_loop((), limits) is None
    assert "3 times" in (detect_loop(("a", "x", "a", "y", "a"), limits) or "")
    assert "cycle of 2" in (detect_loop(("x", "a", "b", "a", "b"), limits) or "")
    # a threshold of one makes any call a loop, distinct calls included
    once = Limits(loop_window=6, loop_threshold=1)
    assert "1 times" in (detect_loop(("a", "b"), once) or "")


def test_no_progress_stops_a_call_that_keeps_returning_the_same_result(tmp_path: Path) -> None:
    # The repeated call is spread out (A B C A D E A): never three times within the loop
    # window of six calls and never a back-to-back cycle, so only no-progress can see it.
    limits = Limits(loop_window=6, loop_threshold=3, no_progress_window=20, no_progress_repeats=3)
    items = ["job", "b", "c", "job", "d", "e", "job", "f"]
    model = ScriptedModel([function_call("check", {"item": i}) for i in items] + [text("done")])
    agent = Agent(model, tools=[check], trace_dir=tmp_path, limits=limits)

    result = agent.run_sync("wait for the job")

    assert_stopped_by(result, "no_progress")
    assert result.steps == 7
    job_results = [m.content for m in tool_results(result)][::3]
    assert job_results == ["unchanged"] * 3


# --- failures -----------------------------------------------------------------------------


def test_running_out_of_script_is_a_model_error(tmp_path: Path) -> None:
    model = ScriptedModel([function_call("lookup", {"key": "a"})])
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("look it up")

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert result.output is None
    assert "step 2" in (result.error or "")
    assert_every_call_answered_once(result)
    failures = [e for e in result.events if e.kind == "model_error"]
    assert len(failures) == 1 and failures[0].transient is False
    assert guard_events(result) == []


def test_transient_model_errors_are_retried_until_the_call_succeeds(tmp_path: Path) -> None:
    attempts = count(1)

    def flaky_model(request: pi_runtime.ModelRequest) -> dict[str, Any]:
        if next(attempts) <= 2:
            raise ModelError("rate limited", transient=True)
        return {"text": "answer after retries"}

    agent = Agent(FunctionModel(flaky_model), trace_dir=tmp_path, limits=Limits(retry_base_s=0.001))

    result = agent.run_sync("hello")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert result.output == "answer after retries"
    failures = [e for e in result.events if e.kind == "model_error"]
    assert [(e.attempt, e.transient) for e in failures] == [(1, True), (2, True)]
    assert all(e.retry_in_ms is not None for e in failures)
    assert result.metrics["model_errors"] == 2
    assert result.steps == 1


def test_transient_model_errors_give_up_after_the_retries(tmp_path: Path) -> None:
    def always_busy(request: pi_runtime.ModelRequest) -> dict[str, Any]:
        raise ModelError("overloaded", transient=True)

    agent = Agent(FunctionModel(always_busy), trace_dir=tmp_path, limits=Limits(retry_base_s=0.001))

    result = agent.run_sync("hello")

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    failures = [e for e in result.events if e.kind == "model_error"]
    assert [e.attempt for e in failures] == [1, 2, 3]
    assert failures[-1].retry_in_ms is None


def test_a_crashing_model_adapter_fails_the_run_without_raising(tmp_path: Path) -> None:
    def broken(request: pi_runtime.ModelRequest) -> dict[str, Any]:
        raise RuntimeError("adapter bug")

    agent = Agent(FunctionModel(broken), trace_dir=tmp_path)

    result = agent.run_sync("hello")

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert "RuntimeError" in (result.error or "")
    assert "adapter bug" in (result.error or "")
    assert [e.kind for e in result.events][-1] == "run_finished"


def test_a_model_timeout_is_a_model_error_not_the_wall_clock(tmp_path: Path) -> None:
    # An adapter's own TimeoutError (a read timeout) says nothing about the run's clock.
    def timing_out(request: pi_runtime.ModelRequest) -> dict[str, Any]:
        raise TimeoutError("read timed out")

    agent = Agent(
        FunctionModel(timing_out),
        trace_dir=tmp_path,
        limits=Limits(retry_base_s=0.001, wall_clock_s=600),
    )

    result = agent.run_sync("hello")

    assert (result.status, result.stop_reason) == ("failed", "model_error"), result.error
    assert guard_events(result) == []
    assert "read timed out" in (result.error or "")


def test_an_unrecoverable_tool_failure_stops_the_run(tmp_path: Path) -> None:
    @tool
    def read_ledger(account: str) -> str:
        """Read an account's ledger.

        Args:
            account: the account.
        """
        raise UnrecoverableError("the ledger database is gone")

    model = ScriptedModel([function_call("read_ledger", {"account": "42"}), text("done")])
    agent = Agent(model, tools=[read_ledger], trace_dir=tmp_path)

    result = agent.run_sync("show my ledger")

    assert (result.status, result.stop_reason) == ("failed", "tool_error")
    assert "ledger database is gone" in (result.error or "")
    assert_every_call_answered_once(result)
    assert len(model.requests) == 1


def test_a_security_violation_stops_the_run_with_an_audit_event(tmp_path: Path) -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file's path.
        """
        raise SecurityViolation(f"access to {path} is forbidden")

    model = ScriptedModel([function_call("read_file", {"path": "/etc/shadow"}), text("done")])
    agent = Agent(model, tools=[read_file], trace_dir=tmp_path)

    result = agent.run_sync("read the password file")

    assert (result.status, result.stop_reason) == ("failed", "security")
    assert_every_call_answered_once(result)
    audits = [e for e in result.events if e.kind == "security_audit"]
    assert len(audits) == 1
    assert audits[0].name == "read_file"
    assert audits[0].tool_call_id == "call_0_0"
    assert "/etc/shadow" in audits[0].detail
    assert len(model.requests) == 1


def test_a_final_answer_completes_the_run_with_its_text(tmp_path: Path) -> None:
    model = ScriptedModel([function_call("lookup", {"key": "x"}), text("x is 42")])
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert result.ok
    assert result.output == "x is 42"
    assert result.error is None
    assert result.steps == 2
    assert guard_events(result) == []
    assert_every_call_answered_once(result)


@pytest.mark.parametrize("reason", ["max_steps", "loop_detected"])
def test_guard_endings_are_recorded_in_the_trace(tmp_path: Path, reason: str) -> None:
    step = function_call("ping", {"target": "db"})
    limits = Limits(max_steps=1) if reason == "max_steps" else Limits()
    model = ScriptedModel([step] * 4)
    agent = Agent(model, tools=[counting_tool()], trace_dir=tmp_path, limits=limits)

    result = agent.run_sync("ping")

    assert result.trace is not None
    lines = [json.loads(x) for x in Path(result.trace).read_text(encoding="utf-8").splitlines()]
    guards = [x for x in lines if x["kind"] == "guard"]
    assert [g["guard"] for g in guards] == [reason]
    assert lines[-1]["kind"] == "run_finished"
    assert lines[-1]["stop_reason"] == reason
    assert lines[-1]["status"] == "stopped"


def test_limits_as_a_trace_writes_them_are_every_field_as_given() -> None:
    import dataclasses

    limits = Limits(max_steps=7, token_budget=None, wall_clock_s=1.5, cost_budget=0.25)
    assert limits.to_dict() == dataclasses.asdict(limits)
    assert limits.to_dict()["max_steps"] == 7 and limits.to_dict()["token_budget"] is None
