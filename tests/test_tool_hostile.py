"""Tools that misbehave: whatever a tool raises or returns, the run goes on and the model
reads one structured tool error, at once, from one run of the tool.

Each test here is the regression test of one way a tool could hang a call, end the run,
mislead the model or do its side effect twice.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import Agent, RunResult, ToolError, ToolResultMessage, tool
from pi_runtime.durable import Store
from pi_runtime.durable.executor import execute_job
from pi_runtime.messages import tool_error_info
from pi_runtime.testing import ScriptedModel, function_call, text
from pi_runtime.tools import ToolSpec


def run_one_call(spec: ToolSpec, model: ScriptedModel | None = None) -> RunResult:
    """A run whose model calls `spec` once, then answers."""
    model = model or ScriptedModel([function_call(spec.name, {"x": 1}), text("done")])
    return Agent(model, tools=[spec]).run_sync("go")


def the_error(result: RunResult) -> dict[str, str]:
    """The one tool result of `result`, which must be an error, as the model reads it."""
    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error
    content: dict[str, str] = json.loads(answer.content)
    assert set(content) == {"kind", "message", "hint"}
    return content


# --- what a tool raises -----------------------------------------------------------------


def test_a_sync_tool_raising_stop_iteration_fails_at_once_not_at_its_timeout() -> None:
    runs: list[int] = []

    @tool(timeout_s=5, retries=0)
    def first(x: int) -> int:
        """The first item."""
        runs.append(x)
        raise StopIteration  # next() on an empty iterator

    error = the_error(run_one_call(first))

    assert error["kind"] == "tool_error"  # not `timeout`: the call did not hang
    assert "StopIteration" in error["message"]
    assert runs == [1]


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit()], ids=["exit", "genexit"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_tools_system_exit_is_its_failure_not_the_end_of_the_run(
    exc: BaseException, is_async: bool
) -> None:
    runs: list[int] = []

    def body(x: int) -> int:
        runs.append(x)
        raise exc

    async def async_body(x: int) -> int:
        await asyncio.sleep(0)  # raised after a wait, where the timeout's task is waiting
        return body(x)

    quits = tool(name="quits", description="Quits.", retries=2)(async_body if is_async else body)

    error = the_error(run_one_call(quits))

    assert error["kind"] == "tool_error"
    assert type(exc).__name__ in error["message"]
    assert runs == [1]  # a failure, not a transient one: not retried


def test_a_keyboard_interrupt_raised_in_a_sync_tools_thread_is_its_failure() -> None:
    # no Ctrl-C reaches a thread other than the main one: the tool raised it itself
    @tool(retries=0)
    def interrupts(x: int) -> int:
        """Interrupts."""
        raise KeyboardInterrupt

    error = the_error(run_one_call(interrupts))

    assert error["kind"] == "tool_error"
    assert "KeyboardInterrupt" in error["message"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words for it")


class Key:
    def __repr__(self) -> str:
        raise RuntimeError("no words for it")


def test_an_exception_whose_str_raises_is_reported_by_its_type() -> None:
    @tool(retries=0)
    def broken(x: int) -> int:
        """Broken."""
        raise Unprintable

    error = the_error(run_one_call(broken))

    assert error["kind"] == "tool_error"
    assert "Unprintable" in error["message"]


def test_a_key_error_whose_key_repr_raises_names_the_keys_type() -> None:
    @tool(retries=0)
    def fetch(x: int) -> int:
        """Fetch."""
        raise KeyError(Key())

    error = the_error(run_one_call(fetch))

    assert error["kind"] == "not_found"
    assert "Key" in error["message"]


@pytest.mark.parametrize("raised", ["exception", "tool-error"])
def test_a_huge_error_is_cut_like_a_result_and_says_so(raised: str) -> None:
    @tool(retries=0)
    def verbose(x: int) -> int:
        """Fails at length."""
        if raised == "exception":
            raise ValueError("E" * 300_000)
        raise ToolError("M" * 300_000, hint="H" * 300_000)

    model = ScriptedModel([function_call("verbose", {"x": 1}), text("done")])
    error = the_error(run_one_call(verbose, model))

    (seen,) = [m for m in model.calls[1].messages if isinstance(m, ToolResultMessage)]
    assert len(seen.content.encode()) <= verbose.max_result_bytes  # the next request's
    assert "cut" in error["message"] and "300000 bytes" in error["message"]
    if raised == "tool-error":
        assert "cut" in error["hint"] and len(error["hint"]) < 300_000


def test_an_error_info_is_cut_on_a_character_boundary() -> None:
    from pi_runtime.messages._tool_error import MAX_HINT_BYTES, MAX_MESSAGE_BYTES

    info = tool_error_info("tool_error", "é" * MAX_MESSAGE_BYTES, "ü" * MAX_HINT_BYTES)

    assert len(info.message.encode()) <= MAX_MESSAGE_BYTES
    assert len(info.hint.encode()) <= MAX_HINT_BYTES
    assert info.message.startswith("éé") and "cut" in info.message
    assert info.hint.startswith("üü") and "cut" in info.hint


# --- what a tool returns ----------------------------------------------------------------


def cyclic() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def deep() -> list[Any]:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    return value


class Unreadable:
    def __str__(self) -> str:
        raise ValueError("no words for it")


@pytest.mark.parametrize(
    "make",
    [lambda: b"\xff", cyclic, deep, Unreadable, lambda: [Unreadable()]],
    ids=["bad-bytes", "cycle", "deep", "str-raises", "str-raises-inside"],
)
def test_a_result_that_cannot_be_encoded_is_the_tools_failure(make: Callable[[], Any]) -> None:
    @tool(retries=0)
    def produce(x: int) -> Any:
        """Produce."""
        return make()

    error = the_error(run_one_call(produce))

    assert error["kind"] == "tool_error"  # not `invalid_arguments`: the model did no wrong
    assert "result could not be encoded" in error["message"]


def test_a_huge_int_result_is_written_out_and_cut() -> None:
    @tool(retries=0)
    def power(x: int) -> int:
        """10 to the 5000th."""
        return 10**5000

    result = run_one_call(power)

    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert not answer.is_error
    assert answer.content.startswith("1000")


@pytest.mark.parametrize(
    "make",
    [
        lambda: (i for i in range(3)),
        lambda: iter(range(3)),
        lambda: map(int, "012"),
        lambda: itertools.count(),  # never ends: read up to the limit
    ],
    ids=["generator", "iter", "map", "count"],
)
def test_an_iterator_result_is_read_as_a_list_up_to_a_limit(
    make: Callable[[], Iterator[int]],
) -> None:
    # a tool returning `(p.name for p in paths)` is ordinary; `count()` must not eat memory
    @tool(retries=0)
    def numbers(x: int) -> Any:
        """Numbers."""
        return make()

    result = run_one_call(numbers)
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert not answer.is_error, answer.content
    if answer.content.startswith("[0,1,2]"):
        assert answer.content == "[0,1,2]"
    else:  # the endless one: its first items, then the cut the model reads
        assert answer.content.startswith("[0,1,2,3") and "truncated" in answer.content


def test_a_sync_tools_result_is_converted_under_its_timeout() -> None:
    # a value whose conversion never ends takes the tool's time, not the event loop's
    release = threading.Event()

    class Stuck:
        def __str__(self) -> str:
            release.wait(10)
            return "late"

    @tool(timeout_s=0.2, retries=0)
    def stuck(x: int) -> Any:
        """Stuck."""
        return Stuck()

    try:
        error = the_error(run_one_call(stuck))
    finally:
        release.set()

    assert error["kind"] == "timeout"


# --- side effects happen at most once ---------------------------------------------------


def test_a_non_idempotent_tool_that_times_out_runs_once() -> None:
    placed: list[str | None] = []
    release = threading.Event()

    @tool(idempotent=False, timeout_s=0.2, retries=2)
    def order(x: int, idempotency_key: str | None = None) -> str:
        """Place an order."""
        placed.append(idempotency_key)
        release.wait(10)  # the side effect outlasts the timeout
        return "placed"

    try:
        error = the_error(run_one_call(order))
    finally:
        release.set()

    assert error["kind"] == "timeout"
    assert "may or may not have run" in error["hint"]
    assert len(placed) == 1


def test_a_non_idempotent_jobs_timeout_runs_once_and_ends_outcome_unknown(store: Store) -> None:
    placed: list[int] = []

    @tool(background=True, idempotent=False, timeout_s=0.2, retries=2)
    async def order(x: int) -> str:
        """Place an order."""
        placed.append(x)
        await asyncio.sleep(10)
        return "placed"

    store.enqueue_job("order", {"x": 1}, retry_safe=False)
    claimed = store.claim_job("w", lease_s=30)
    assert claimed is not None

    outcome = asyncio.run(execute_job(store, claimed, order, owner="w", lease_s=30))

    assert outcome == "outcome_unknown"
    assert placed == [1]


class _Unprintable(Exception):  # not a ValueError: pydantic lets it through
    def __str__(self) -> str:
        raise RuntimeError("cannot say")


class _Refuses:
    """A parameter type whose validator raises an exception that cannot be printed, or
    one whose message runs over lines."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def check(value: Any) -> Any:
            if value == 1:
                raise _Unprintable()
            raise RuntimeError("first line\nsecond line")

        return core_schema.no_info_plain_validator_function(
            check, json_schema_input_schema=core_schema.int_schema()
        )


@pytest.mark.parametrize(
    ("n", "says"), [(1, "_Unprintable"), (2, "RuntimeError: first line second line")]
)
def test_a_validator_refusing_in_words_it_cannot_print_is_one_line_for_the_model(
    n: int, says: str
) -> None:
    # the gate formatted the validator's exception itself: a `__str__` that raised
    # escaped the argument check, and a message over lines reached the model as such
    @tool
    def picky(x: _Refuses) -> str:  # type: ignore[valid-type]
        """Picky."""
        return "ran"

    model = ScriptedModel([function_call("picky", {"x": n}), text("done")])
    error = the_error(Agent(model, tools=[picky]).run_sync("go"))
    assert error["kind"] == "invalid_arguments"
    assert error["message"] == f"Arguments were rejected: {says}"
