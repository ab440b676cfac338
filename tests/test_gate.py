"""The gate, alone: every tool call the model makes is checked, run and reported here.

Each error the model can see is a tool-result message with `is_error` true whose content
is exactly `{kind, message, hint}`. Calls the gate refuses never reach the function.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
from collections.abc import Coroutine
from typing import Any

import pytest
from pydantic import BaseModel

from pi_runtime import (
    SecurityViolation,
    ToolCall,
    ToolError,
    TransientError,
    UnrecoverableError,
    UserError,
    tool,
)
from pi_runtime.tools import Gate, ToolOutcome, ToolSpec, idempotency_key

SESSION = "session-test"


def make_gate(*tools: ToolSpec, allow: list[str] | None = None, session: str = SESSION) -> Gate:
    return Gate(list(tools), allow=allow, session_id=session, retry_base_s=0.001)


def call(name: str, raw: str = "{}", *, id: str = "call_1", truncated: bool = False) -> ToolCall:
    return ToolCall(id=id, name=name, raw=raw, truncated=truncated)


def run(gate: Gate, tool_call: ToolCall) -> ToolOutcome:
    return asyncio.run(gate.run(tool_call))


def run_coro(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def error_of(outcome: ToolOutcome) -> dict[str, str]:
    """The error content the model reads, checked for the contract's exact shape."""
    message = outcome.message
    assert message.is_error is True
    assert outcome.is_error is True
    assert message.tool_call_id == outcome.call.id
    assert message.name == outcome.call.name
    content = json.loads(message.content)
    assert set(content) == {"kind", "message", "hint"}
    assert all(isinstance(v, str) and v for v in content.values()), content
    assert message.error is not None
    assert (message.error.kind, message.error.message, message.error.hint) == (
        content["kind"],
        content["message"],
        content["hint"],
    )
    return content


# --- refused before running -------------------------------------------------------------


def test_unknown_tool_is_reported_with_the_available_names() -> None:
    @tool
    def get_weather(city: str) -> str:
        return "sunny"

    @tool
    def set_reminder(text: str) -> str:
        return "ok"

    outcome = run(make_gate(get_weather, set_reminder), call("get_wether", '{"city": "x"}'))

    error = error_of(outcome)
    assert error["kind"] == "unknown_tool"
    assert "get_wether" in error["message"]
    assert "get_weather" in error["message"]
    assert "set_reminder" in error["message"]
    assert outcome.executed is False


def test_unknown_tool_message_does_not_reveal_tools_outside_the_allow_list() -> None:
    @tool
    def search(q: str) -> str:
        return ""

    @tool
    def drop_database(name: str) -> str:
        return ""

    outcome = run(make_gate(search, drop_database, allow=["search"]), call("nope"))

    error = error_of(outcome)
    assert error["kind"] == "unknown_tool"
    assert "search" in error["message"]
    assert "drop_database" not in error["message"]


def test_tool_outside_the_allow_list_is_denied_and_never_runs() -> None:
    ran: list[str] = []

    @tool
    def read_file(path: str) -> str:
        ran.append("read")
        return "data"

    @tool
    def delete_file(path: str) -> str:
        ran.append("delete")
        return "deleted"

    gate = make_gate(read_file, delete_file, allow=["read_file"])
    outcome = run(gate, call("delete_file", '{"path": "/etc/passwd"}'))

    error = error_of(outcome)
    assert error["kind"] == "permission_denied"
    assert "delete_file" in error["message"]
    assert outcome.executed is False
    assert ran == []
    assert [t.name for t in gate.offered] == ["read_file"]


def test_truncated_tool_call_is_not_executed_even_with_valid_json() -> None:
    ran: list[str] = []

    @tool(idempotent=False)
    def send_email(to: str, body: str) -> str:
        ran.append(to)
        return "sent"

    raw = '{"to": "boss@example.com", "body": "I quit"}'
    outcome = run(make_gate(send_email), call("send_email", raw, truncated=True))

    error = error_of(outcome)
    assert error["kind"] == "truncated_call"
    assert "not executed" in error["message"]
    assert outcome.executed is False
    assert ran == []


def test_truncated_call_is_reported_as_truncated_not_as_bad_json() -> None:
    @tool
    def write(text: str) -> str:
        return "ok"

    outcome = run(make_gate(write), call("write", '{"text": "half a sent', truncated=True))

    assert error_of(outcome)["kind"] == "truncated_call"


def test_arguments_over_max_arg_bytes_are_refused_before_running() -> None:
    ran: list[str] = []

    @tool(max_arg_bytes=50)
    def note(text: str) -> str:
        ran.append(text)
        return "ok"

    # 18 characters but 54 bytes of CJK text (plus the JSON around it): the limit is bytes.
    raw = json.dumps({"text": "漢" * 18}, ensure_ascii=False)
    assert len(raw) < 50 < len(raw.encode())
    outcome = run(make_gate(note), call("note", raw))

    error = error_of(outcome)
    assert error["kind"] == "arguments_too_large"
    assert str(len(raw.encode())) in error["message"]
    assert "50" in error["message"]
    assert outcome.executed is False
    assert ran == []


def test_arguments_exactly_at_max_arg_bytes_are_accepted() -> None:
    @tool(max_arg_bytes=14)
    def note(text: str) -> str:
        return text

    raw = '{"text":"abc"}'
    assert len(raw.encode()) == 14
    outcome = run(make_gate(note), call("note", raw))

    assert not outcome.is_error
    assert outcome.message.content == "abc"


def test_non_json_arguments_are_invalid_arguments() -> None:
    ran: list[str] = []

    @tool
    def lookup(word: str) -> str:
        ran.append(word)
        return ""

    outcome = run(make_gate(lookup), call("lookup", "{word: 'cat'}"))

    error = error_of(outcome)
    assert error["kind"] == "invalid_arguments"
    assert "not valid JSON" in error["message"]
    assert "JSON object" in error["hint"]
    assert outcome.executed is False
    assert ran == []


@pytest.mark.parametrize(
    ("raw", "type_name"),
    [("[1, 2]", "list"), ("42", "int"), ('"cat"', "str"), ("null", "NoneType"), ("true", "bool")],
)
def test_json_that_is_not_an_object_is_invalid_arguments(raw: str, type_name: str) -> None:
    ran: list[str] = []

    @tool
    def lookup(word: str = "") -> str:
        ran.append(word)
        return ""

    outcome = run(make_gate(lookup), call("lookup", raw))

    error = error_of(outcome)
    assert error["kind"] == "invalid_arguments"
    assert "JSON object" in error["message"]
    assert type_name in error["message"]
    assert ran == []


class Line(BaseModel):
    sku: str
    qty: int


def test_schema_violation_points_at_the_json_path() -> None:
    ran: list[Any] = []

    @tool
    def place_order(items: list[Line], note: str = "") -> str:
        ran.append(items)
        return "ok"

    raw = json.dumps({"items": [{"sku": "A-1", "qty": "two"}, {"sku": "B-2", "qty": 1}]})
    outcome = run(make_gate(place_order), call("place_order", raw))

    error = error_of(outcome)
    assert error["kind"] == "invalid_arguments"
    assert "$.items[0].qty" in error["message"]
    assert "'two'" in error["message"]
    assert "$.items[1]" not in error["message"]
    assert outcome.executed is False
    assert ran == []


def test_missing_required_argument_is_named() -> None:
    @tool
    def get_weather(city: str, days: int = 1) -> str:
        return ""

    error = error_of(run(make_gate(get_weather), call("get_weather", '{"days": 2}')))

    assert error["kind"] == "invalid_arguments"
    assert "'city'" in error["message"]
    assert "required" in error["message"]


def test_unexpected_argument_is_refused_at_every_level() -> None:
    ran: list[Any] = []

    @tool
    def place_order(items: list[Line]) -> str:
        ran.append(items)
        return "ok"

    gate = make_gate(place_order)
    top = error_of(run(gate, call("place_order", '{"items": [], "rush": true}')))
    nested = error_of(
        run(gate, call("place_order", '{"items": [{"sku": "a", "qty": 1, "price": 3}]}'))
    )

    assert top["kind"] == nested["kind"] == "invalid_arguments"
    assert "'rush'" in top["message"]
    assert "$.items[0]" in nested["message"]
    assert "'price'" in nested["message"]
    assert ran == []


def test_model_cannot_supply_the_idempotency_key_itself() -> None:
    keys: list[str | None] = []

    @tool(idempotent=False)
    def pay(amount: int, idempotency_key: str | None = None) -> str:
        keys.append(idempotency_key)
        return "paid"

    outcome = run(make_gate(pay), call("pay", '{"amount": 5, "idempotency_key": "forged"}'))

    assert error_of(outcome)["kind"] == "invalid_arguments"
    assert keys == []


def test_many_schema_errors_are_summarised() -> None:
    @tool
    def grid(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int, j: int) -> str:
        return ""

    raw = json.dumps({k: "x" for k in "abcdefghij"})
    error = error_of(run(make_gate(grid), call("grid", raw)))

    assert error["kind"] == "invalid_arguments"
    assert "… and 2 more" in error["message"]


# --- failures while running -------------------------------------------------------------


def test_tool_error_kind_message_and_hint_reach_the_model_unchanged() -> None:
    attempts: list[int] = []

    @tool
    def book_flight(flight: str) -> str:
        attempts.append(1)
        raise ToolError("Flight CA981 is sold out", kind="sold_out", hint="Offer CA983.")

    outcome = run(make_gate(book_flight), call("book_flight", '{"flight": "CA981"}'))

    assert error_of(outcome) == {
        "kind": "sold_out",
        "message": "Flight CA981 is sold out",
        "hint": "Offer CA983.",
    }
    assert outcome.error_class == "semantic"
    assert outcome.executed is True
    assert attempts == [1]  # semantic errors are not retried


def test_tool_error_without_hint_still_gives_the_model_a_hint() -> None:
    @tool
    def f(x: int) -> str:
        raise ToolError("x must be even")

    error = error_of(run(make_gate(f), call("f", '{"x": 3}')))

    assert error["kind"] == "tool_error"
    assert error["message"] == "x must be even"


@pytest.mark.parametrize(
    "exc",
    [LookupError("no such order"), KeyError("A-17"), IndexError("page 9"), FileNotFoundError()],
)
def test_lookup_errors_become_not_found(exc: Exception) -> None:
    @tool
    def get_order(order_id: str) -> str:
        raise exc

    outcome = run(make_gate(get_order), call("get_order", '{"order_id": "A-17"}'))

    assert error_of(outcome)["kind"] == "not_found"
    assert outcome.error_class == "semantic"


def test_key_error_message_names_the_missing_key() -> None:
    @tool
    def get_order(order_id: str) -> str:
        raise KeyError(order_id)

    error = error_of(run(make_gate(get_order), call("get_order", '{"order_id": "A-17"}')))

    assert "'A-17'" in error["message"]


def test_unexpected_exception_is_a_tool_error_naming_its_type() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        return a / b

    outcome = run(make_gate(divide), call("divide", '{"a": 1, "b": 0}'))

    error = error_of(outcome)
    assert error["kind"] == "tool_error"
    assert "ZeroDivisionError" in error["message"]
    assert outcome.error_class == "semantic"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ConnectionError("connection reset"), "transient"),
        (TimeoutError("upstream timed out"), "timeout"),
        (TransientError("rate limited"), "transient"),
    ],
)
def test_transient_failures_are_retried_then_reported(exc: Exception, kind: str) -> None:
    attempts: list[int] = []

    @tool(retries=2)
    def fetch(url: str) -> str:
        attempts.append(1)
        raise exc

    outcome = run(make_gate(fetch), call("fetch", '{"url": "https://example.com"}'))

    error = error_of(outcome)
    assert error["kind"] == kind
    assert outcome.error_class == "transient"
    assert len(attempts) == 3  # the first try and `retries` more
    assert len(outcome.attempts) == 3
    assert [a.error_class for a in outcome.attempts] == ["transient"] * 3
    assert all(a.retry_in_ms is not None for a in outcome.attempts[:2])
    assert outcome.attempts[-1].retry_in_ms is None


def test_transient_failure_that_recovers_returns_the_result() -> None:
    attempts: list[int] = []

    @tool(retries=3)
    def fetch(url: str) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("flaky")
        return "body"

    outcome = run(make_gate(fetch), call("fetch", '{"url": "u"}'))

    assert not outcome.is_error
    assert outcome.message.content == "body"
    assert len(attempts) == 3
    assert [a.error_class for a in outcome.attempts] == ["transient", "transient", None]


def test_zero_retries_means_a_single_attempt() -> None:
    attempts: list[int] = []

    @tool(retries=0)
    def fetch(url: str) -> str:
        attempts.append(1)
        raise ConnectionError("down")

    outcome = run(make_gate(fetch), call("fetch", '{"url": "u"}'))

    assert error_of(outcome)["kind"] == "transient"
    assert attempts == [1]


def test_async_tool_running_past_its_timeout_reports_timeout() -> None:
    finished: list[bool] = []

    @tool(timeout_s=0.05, retries=0)
    async def slow_report(year: int) -> str:
        await asyncio.sleep(30)
        finished.append(True)
        return "report"

    outcome = run(make_gate(slow_report), call("slow_report", '{"year": 2024}'))

    error = error_of(outcome)
    assert error["kind"] == "timeout"
    assert "0.05" in error["message"]
    assert outcome.error_class == "transient"
    assert finished == []  # the coroutine was cancelled, not left to finish


def test_sync_tool_running_past_its_timeout_reports_timeout() -> None:
    release = threading.Event()

    @tool(timeout_s=0.05, retries=0)
    def slow_export(table: str) -> str:
        release.wait(10)
        return "done"

    async def scenario() -> ToolOutcome:
        try:
            return await make_gate(slow_export).run(call("slow_export", '{"table": "t"}'))
        finally:
            release.set()  # let the worker thread end so the loop can close

    outcome = run_coro(scenario())

    error = error_of(outcome)
    assert error["kind"] == "timeout"
    assert "0.05" in error["message"]


def test_an_async_tool_runs_in_the_callers_task() -> None:
    # no task of its own per call: the loop's per-turn overhead stays small
    seen: list[asyncio.Task[Any] | None] = []

    @tool(timeout_s=5, retries=0)
    async def where(x: int) -> str:
        seen.append(asyncio.current_task())
        return "here"

    async def scenario() -> tuple[ToolOutcome, asyncio.Task[Any] | None]:
        return await make_gate(where).run(call("where", '{"x": 1}')), asyncio.current_task()

    outcome, caller = run_coro(scenario())

    assert outcome.message.content == "here"
    assert seen == [caller]


def test_a_tools_own_timeout_error_is_its_failure_not_the_deadline() -> None:
    @tool(timeout_s=5, retries=0)
    async def fetch(url: str) -> str:
        raise TimeoutError("upstream read timed out")

    outcome = run(make_gate(fetch), call("fetch", '{"url": "u"}'))

    error = error_of(outcome)
    assert "upstream read timed out" in error["message"]
    assert "did not finish within" not in error["message"]


def test_a_tool_that_swallows_its_cancellation_still_timed_out() -> None:
    @tool(timeout_s=0.05, retries=0)
    async def stubborn(x: int) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "finished anyway"
        return "never"

    outcome = run(make_gate(stubborn), call("stubborn", '{"x": 1}'))

    error = error_of(outcome)
    assert error["kind"] == "timeout"
    assert "0.05" in error["message"]


def test_timeout_is_retried_like_any_transient_failure() -> None:
    starts: list[int] = []

    @tool(timeout_s=0.05, retries=1)
    async def slow(x: int) -> str:
        starts.append(x)
        await asyncio.sleep(30)
        return "never"

    outcome = run(make_gate(slow), call("slow", '{"x": 1}'))

    assert error_of(outcome)["kind"] == "timeout"
    assert starts == [1, 1]


def test_semantic_failures_are_not_retried() -> None:
    attempts: list[int] = []

    @tool(retries=5)
    def parse(text: str) -> str:
        attempts.append(1)
        raise ValueError("not a date")

    outcome = run(make_gate(parse), call("parse", '{"text": "x"}'))

    assert error_of(outcome)["kind"] == "invalid_arguments"
    assert attempts == [1]


def test_unrecoverable_error_is_classified_unrecoverable_and_not_retried() -> None:
    attempts: list[int] = []

    @tool(retries=3)
    def query(sql: str) -> str:
        attempts.append(1)
        raise UnrecoverableError("database is gone")

    outcome = run(make_gate(query), call("query", '{"sql": "select 1"}'))

    error = error_of(outcome)
    assert outcome.error_class == "unrecoverable"
    assert error["kind"] == "unrecoverable"
    assert error["message"] == "database is gone"
    assert attempts == [1]


def test_security_violation_is_classified_security_and_not_retried() -> None:
    attempts: list[int] = []

    @tool(retries=3)
    def read(path: str) -> str:
        attempts.append(1)
        raise SecurityViolation("path escapes the sandbox", kind="path_traversal")

    outcome = run(make_gate(read), call("read", '{"path": "../../etc/shadow"}'))

    error = error_of(outcome)
    assert outcome.error_class == "security"
    assert error["kind"] == "path_traversal"
    assert attempts == [1]


# --- idempotency keys -------------------------------------------------------------------


def test_non_idempotent_tool_gets_the_same_key_on_every_retry() -> None:
    keys: list[str | None] = []

    @tool(idempotent=False, retries=2)
    def send_payment(amount_cents: int, idempotency_key: str | None = None) -> str:
        keys.append(idempotency_key)
        if len(keys) < 3:
            raise ConnectionError("payment gateway reset the connection")
        return "paid"

    gate = make_gate(send_payment, session="sess-42")
    outcome = run(gate, call("send_payment", '{"amount_cents": 1999}', id="call_7"))

    assert not outcome.is_error
    assert outcome.message.content == "paid"
    assert len(keys) == 3
    assert keys[0] is not None
    assert keys == [keys[0]] * 3
    assert keys[0] == idempotency_key("sess-42", "call_7")
    assert outcome.idempotency_key == keys[0]


def test_idempotency_key_differs_per_call_and_per_session() -> None:
    keys: list[str | None] = []

    @tool(idempotent=False)
    def send_email(to: str, idempotency_key: str | None = None) -> str:
        keys.append(idempotency_key)
        return "sent"

    raw = '{"to": "a@example.com"}'
    run(make_gate(send_email, session="s1"), call("send_email", raw, id="call_1"))
    run(make_gate(send_email, session="s1"), call("send_email", raw, id="call_2"))
    run(make_gate(send_email, session="s2"), call("send_email", raw, id="call_1"))
    run(make_gate(send_email, session="s1"), call("send_email", raw, id="call_1"))

    assert len(set(keys[:3])) == 3
    assert keys[3] == keys[0]  # a restarted gate on the same session and call id agrees
    assert keys == [
        idempotency_key("s1", "call_1"),
        idempotency_key("s1", "call_2"),
        idempotency_key("s2", "call_1"),
        idempotency_key("s1", "call_1"),
    ]


def test_idempotency_key_cannot_collide_by_shifting_the_separator() -> None:
    assert idempotency_key("a", "bc") != idempotency_key("ab", "c")


def test_idempotent_tool_gets_no_key() -> None:
    keys: list[str | None] = ["sentinel"]

    @tool
    def get_balance(account: str, idempotency_key: str | None = None) -> str:
        keys[0] = idempotency_key
        return "12.00"

    outcome = run(make_gate(get_balance), call("get_balance", '{"account": "x"}'))

    assert not outcome.is_error
    assert keys == [None]
    assert outcome.idempotency_key is None


def test_non_idempotent_tool_without_key_parameter_still_records_the_key() -> None:
    @tool(idempotent=False)
    def archive(doc_id: str) -> str:
        return "archived"

    outcome = run(make_gate(archive), call("archive", '{"doc_id": "d1"}', id="call_9"))

    assert outcome.message.content == "archived"
    assert outcome.idempotency_key == idempotency_key(SESSION, "call_9")


# --- results ----------------------------------------------------------------------------


MARKER = re.compile(r"\n…\[truncated: showing the first (\d+) of (\d+) bytes\]$")


@pytest.mark.parametrize("limit", [100, 101, 102, 103, 150])
def test_large_result_is_cut_with_marker_and_size_without_splitting_characters(
    limit: int,
) -> None:
    text = "漢字かな" * 100  # 3 bytes per character, 1200 bytes

    @tool(max_result_bytes=limit)
    def read_book(chapter: int) -> str:
        return text

    outcome = run(make_gate(read_book), call("read_book", '{"chapter": 1}'))

    content = outcome.message.content
    assert not outcome.is_error
    assert outcome.result_truncated is True
    assert outcome.result_bytes == 1200
    assert len(content.encode("utf-8")) <= limit
    match = MARKER.search(content)
    assert match is not None, content
    head = content[: match.start()]
    assert head and text.startswith(head)  # a clean prefix: no broken or replaced char
    assert int(match.group(1)) == len(head.encode())
    assert int(match.group(2)) == 1200


def test_result_within_the_limit_is_returned_verbatim() -> None:
    @tool(max_result_bytes=100)
    def greet(name: str) -> str:
        return "你好, " + name * 46  # exactly 100 bytes

    outcome = run(make_gate(greet), call("greet", '{"name": "Li"}'))

    assert len(outcome.message.content.encode()) == 100
    assert outcome.message.content == "你好, " + "Li" * 46
    assert outcome.result_truncated is False
    assert outcome.result_bytes == 100


@pytest.mark.parametrize("limit", [1, 10, 40, 99])
def test_a_result_limit_too_small_for_the_marker_is_refused(limit: int) -> None:
    # A limit below the marker's room could never hold: @tool refuses it up front.
    def dump(n: int) -> str:
        return "x" * 1000

    with pytest.raises(UserError, match="max_result_bytes must be at least 100"):
        tool(max_result_bytes=limit)(dump)


class Forecast(BaseModel):
    city: str
    high_c: int


@dataclasses.dataclass
class Receipt:
    order_id: str
    total: float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"city": "北京", "temps": [1, 2]}, '{"city":"北京","temps":[1,2]}'),
        (Forecast(city="Paris", high_c=21), '{"city":"Paris","high_c":21}'),
        (Receipt(order_id="A-1", total=9.5), '{"order_id":"A-1","total":9.5}'),
        ([1, "two", None], '[1,"two",null]'),
        (42, "42"),
        (True, "true"),
        (None, "null"),
    ],
    ids=["dict", "pydantic", "dataclass", "list", "int", "bool", "none"],
)
def test_non_string_results_are_compact_json(value: Any, expected: str) -> None:
    @tool
    def produce(x: int) -> Any:
        return value

    outcome = run(make_gate(produce), call("produce", '{"x": 0}'))

    assert not outcome.is_error
    assert outcome.message.content == expected


def test_string_results_are_not_json_quoted() -> None:
    @tool
    def say(x: int) -> str:
        return 'He said "hi"'

    assert run(make_gate(say), call("say", '{"x": 0}')).message.content == 'He said "hi"'


def test_arguments_reach_the_function_as_python_types() -> None:
    seen: list[Any] = []

    @tool
    def place_order(items: list[Line], rush: bool = False) -> str:
        seen.extend([items, rush])
        return "ok"

    raw = '{"items": [{"sku": "A", "qty": 2}]}'
    outcome = run(make_gate(place_order), call("place_order", raw))

    assert not outcome.is_error
    assert seen == [[Line(sku="A", qty=2)], False]


# --- several calls ----------------------------------------------------------------------


def test_run_all_runs_calls_concurrently() -> None:
    async def scenario() -> tuple[ToolOutcome, ...]:
        # Each call waits until all three are running: run one by one, none would pass.
        barrier = asyncio.Barrier(3)

        @tool(timeout_s=5, retries=0)
        async def fetch(n: int) -> str:
            await barrier.wait()
            return f"page {n}"

        gate = make_gate(fetch)
        calls = [call("fetch", json.dumps({"n": n}), id=f"call_{n}") for n in range(3)]
        return await gate.run_all(calls)

    outcomes = run_coro(scenario())

    assert [o.message.content for o in outcomes] == ["page 0", "page 1", "page 2"]
    assert not any(o.is_error for o in outcomes)


def test_run_all_keeps_the_models_order_when_later_calls_finish_first() -> None:
    finished: list[int] = []

    async def scenario() -> tuple[ToolOutcome, ...]:
        # Call n may finish only after call n+1 has: the finishing order is 2, 1, 0.
        turns = [asyncio.Event() for _ in range(3)]
        turns[2].set()

        @tool(timeout_s=5, retries=0)
        async def stage(n: int) -> str:
            await turns[n].wait()
            finished.append(n)
            if n > 0:
                turns[n - 1].set()
            return f"result {n}"

        gate = make_gate(stage)
        calls = [call("stage", json.dumps({"n": n}), id=f"call_{n}") for n in range(3)]
        return await gate.run_all(calls)

    outcomes = run_coro(scenario())

    assert finished == [2, 1, 0]
    assert [o.call.id for o in outcomes] == ["call_0", "call_1", "call_2"]
    assert [o.message.tool_call_id for o in outcomes] == ["call_0", "call_1", "call_2"]
    assert [o.message.content for o in outcomes] == ["result 0", "result 1", "result 2"]


def test_run_all_mixes_refusals_and_results_in_order() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    calls = [
        call("echo", '{"text": "a"}', id="c0"),
        call("missing", "{}", id="c1"),
        call("echo", "not json", id="c2"),
        call("echo", '{"text": "d"}', id="c3", truncated=True),
        call("echo", '{"text": "e"}', id="c4"),
    ]
    outcomes = run_coro(make_gate(echo).run_all(calls))

    assert [o.message.tool_call_id for o in outcomes] == ["c0", "c1", "c2", "c3", "c4"]
    assert outcomes[0].message.content == "a"
    assert error_of(outcomes[1])["kind"] == "unknown_tool"
    assert error_of(outcomes[2])["kind"] == "invalid_arguments"
    assert error_of(outcomes[3])["kind"] == "truncated_call"
    assert outcomes[4].message.content == "e"


def test_sync_tools_do_not_block_the_event_loop() -> None:
    # The sync tool waits for a flag only the async tool can set: if the sync tool ran on
    # the loop's thread, the async tool could never run and the wait would give up.
    flag = threading.Event()

    @tool(timeout_s=5, retries=0)
    def wait_for_flag(x: int) -> bool:
        return flag.wait(3)

    @tool(timeout_s=5, retries=0)
    async def raise_flag(x: int) -> str:
        await asyncio.sleep(0)
        flag.set()
        return "raised"

    outcomes = run_coro(
        make_gate(wait_for_flag, raise_flag).run_all(
            [
                call("wait_for_flag", '{"x": 0}', id="c0"),
                call("raise_flag", '{"x": 0}', id="c1"),
            ]
        )
    )

    assert [o.message.content for o in outcomes] == ["true", "raised"]


def test_run_all_with_one_call_returns_one_outcome() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    outcomes = run_coro(make_gate(echo).run_all([call("echo", '{"text": "solo"}')]))

    assert len(outcomes) == 1
    assert outcomes[0].message.content == "solo"


def test_run_all_with_no_calls_returns_nothing() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    assert run_coro(make_gate(echo).run_all([])) == ()


# --- regressions: nothing the model sends or a tool returns makes the gate raise --------


def test_deeply_nested_arguments_are_invalid_arguments_not_a_crash() -> None:
    ran: list[Any] = []

    @tool
    def echo(text: str) -> str:
        ran.append(text)
        return text

    gate = make_gate(echo)
    depth = 20_000  # 40 kB: well inside max_arg_bytes, far past json's recursion limit
    bare = run(gate, call("echo", "[" * depth + "]" * depth))
    inside = run(gate, call("echo", '{"text": ' + "[" * depth + "]" * depth + "}"))

    assert error_of(bare)["kind"] == "invalid_arguments"
    assert error_of(inside)["kind"] == "invalid_arguments"
    assert ran == []


def test_escaped_lone_surrogate_in_arguments_does_not_crash_the_gate() -> None:
    # `"\ud800"` is valid JSON text but decodes to a string UTF-8 cannot encode.
    @tool
    def echo(text: str) -> str:
        return text

    outcome = run(make_gate(echo), call("echo", '{"text": "\\ud800"}'))

    if outcome.is_error:
        assert error_of(outcome)["kind"] == "invalid_arguments"
    outcome.message.content.encode("utf-8")  # what goes to a provider must be UTF-8


def test_result_that_cannot_be_encoded_is_an_error_result_not_an_exception() -> None:
    @tool
    def graph(n: int) -> Any:
        node: dict[str, Any] = {"id": n}
        node["self"] = node  # a cycle: no JSON for it
        return node

    outcome = run(make_gate(graph), call("graph", '{"n": 1}'))

    assert error_of(outcome)["kind"]
    assert outcome.executed is True


def test_deeply_nested_result_is_an_error_result_not_an_exception() -> None:
    @tool
    def nest(depth: int) -> Any:
        value: list[Any] = []
        for _ in range(depth):
            value = [value]
        return value

    outcome = run(make_gate(nest), call("nest", '{"depth": 400}'))

    if outcome.is_error:
        assert error_of(outcome)["kind"]
    else:
        assert outcome.message.content.startswith("[[[")
