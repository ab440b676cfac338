"""Circuit breakers and the runtime's own decisions (seed 002 §4.4, §5.2; seed 001 §8.1).

The tool-call cap ends a request with an answer that says what failed; a call identical
to the one before it is not run; a contract miss can fall back on a safe answer; a
response cut by the output limit never runs its calls, whatever the adapter flagged; and
a run's usage says whether the provider or Pi counted it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pi_runtime import (
    Agent,
    Limits,
    RunResult,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserError,
    UserMessage,
    tool,
)
from pi_runtime.contract import FULFILLMENT_EXAMPLE, OutputContract, fulfillment_contract
from pi_runtime.models import ModelRequest, ModelResponse
from pi_runtime.testing import FunctionModel, ScriptedModel

RAN: list[str] = []


@tool
def fetch(page: str) -> str:
    """Fetch a page."""
    RAN.append(page)
    return f"contents of {page}"


def errors_of(result: RunResult) -> list[str]:
    return [m.error.kind for m in result.messages if isinstance(m, ToolResultMessage) and m.error]


def fetches(*pages: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fetch", "arguments": {"page": p}} for p in pages]}


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


# --- max_tool_calls -----------------------------------------------------------------


def test_past_the_tool_call_cap_the_model_must_answer_and_say_what_failed() -> None:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> dict[str, Any]:
        seen.append(request)
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.origin == "tool_limit":
            return {"text": "I read pages 0 and 1; I could not finish the rest."}
        return fetches(f"p{request.step}")

    limits = Limits(max_tool_calls=2)
    agent = Agent(FunctionModel(reply), tools=[fetch], limits=limits, trace_dir=False)
    result = agent.run_sync("read every page")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert RAN == ["p0", "p1"]
    assert "could not finish" in result.output
    assert seen[-1].tool_choice == "none"  # the forced answer may not call tools
    notices = [m for m in result.messages if isinstance(m, UserMessage) and m.origin != "user"]
    assert [n.origin for n in notices] == ["tool_limit"]
    assert "2 tool calls" in notices[0].content


def test_calls_of_one_response_past_the_cap_are_refused_not_run() -> None:
    model = ScriptedModel([fetches("a", "b", "c", "d"), {"text": "got a and b only"}])
    agent = Agent(model, tools=[fetch], limits=Limits(max_tool_calls=2), trace_dir=False)

    result = agent.run_sync("read four pages")

    assert RAN == ["a", "b"]
    assert errors_of(result) == ["tool_limit", "tool_limit"]
    assert (result.stop_reason, result.output) == ("final_answer", "got a and b only")
    assert model.requests[1].tool_choice == "none"


def test_a_model_that_keeps_calling_tools_past_the_cap_is_stopped() -> None:
    model = FunctionModel(lambda request: fetches(f"p{request.step}"))
    agent = Agent(model, tools=[fetch], limits=Limits(max_tool_calls=1), trace_dir=False)

    result = agent.run_sync("read every page")

    assert (result.status, result.stop_reason, result.steps) == ("stopped", "max_steps", 2)
    assert RAN == ["p0"]
    assert errors_of(result) == ["tool_limit"]
    assert [
        (e.guard, "tool calls were used up" in e.detail) for e in result.events if e.kind == "guard"
    ] == [("max_tool_calls", True)]
    # every call still has its one result: the conversation stays sendable
    assert len([m for m in result.messages if isinstance(m, ToolResultMessage)]) == 2


def test_the_tool_call_cap_is_off_by_default() -> None:
    assert Limits().max_tool_calls is None


# --- block_repeated_calls -------------------------------------------------------------


def test_a_call_identical_to_the_previous_one_is_not_run_and_the_model_is_told_why() -> None:
    model = ScriptedModel([fetches("a"), fetches("a"), {"text": "page a says hello"}])
    agent = Agent(model, tools=[fetch], trace_dir=False)

    result = agent.run_sync("read page a")

    assert RAN == ["a"]
    assert errors_of(result) == ["repeated_call"]
    error = json.loads(model.requests[2].messages[-1].content)
    assert error["kind"] == "repeated_call" and "another way" in error["hint"]
    assert result.stop_reason == "final_answer"


def test_an_identical_call_in_the_same_response_is_not_run_twice() -> None:
    model = ScriptedModel([fetches("a", "a", "b"), {"text": "done"}])
    result = Agent(model, tools=[fetch], trace_dir=False).run_sync("read")
    assert RAN == ["a", "b"]
    assert errors_of(result) == ["repeated_call"]


def test_repeated_calls_run_when_the_breaker_is_off() -> None:
    model = ScriptedModel([fetches("a"), fetches("a"), {"text": "done"}])
    limits = Limits(block_repeated_calls=False)
    result = Agent(model, tools=[fetch], limits=limits, trace_dir=False).run_sync("read")
    assert (RAN, errors_of(result)) == (["a", "a"], [])


def test_the_same_call_after_another_one_is_not_a_repeat() -> None:
    model = ScriptedModel([fetches("a"), fetches("b"), fetches("a"), {"text": "done"}])
    Agent(model, tools=[fetch], trace_dir=False).run_sync("read")
    assert RAN == ["a", "b", "a"]


# --- contract fallback ------------------------------------------------------------------


REFUSAL = {
    "fulfillment": {
        "speech": "Sorry, I could not put that answer together.",
        "data": {},
        "intent": "general_chat",
        "errors": ["the answer did not match the contract"],
    }
}


def test_after_the_last_failed_repair_the_fallback_is_the_output() -> None:
    model = ScriptedModel([{"text": "sunny"}] * 3)
    contract = fulfillment_contract(fallback=REFUSAL)
    result = Agent(model, output=contract, trace_dir=False).run_sync("weather?")

    assert (result.status, result.stop_reason) == ("failed", "contract_violation")
    assert result.output == REFUSAL
    assert result.contract_errors  # the miss is never mistaken for an answer
    assert result.to_dict()["output"] == REFUSAL


def test_without_a_fallback_a_contract_miss_has_no_output() -> None:
    model = ScriptedModel([{"text": "sunny"}] * 3)
    result = Agent(model, output=fulfillment_contract(), trace_dir=False).run_sync("weather?")
    assert (result.stop_reason, result.output) == ("contract_violation", None)


def test_a_text_fallback_is_allowed() -> None:
    contract = fulfillment_contract(fallback="Sorry, please ask again.")
    assert contract.fallback == "Sorry, please ask again."


@pytest.mark.parametrize(
    ("fallback", "match"),
    [
        ({"fulfillment": {"speech": "hi"}}, "does not match"),
        ({"when": object()}, "JSON value"),
        (math.nan, "JSON value"),
    ],
)
def test_a_bad_fallback_is_refused_up_front(fallback: Any, match: str) -> None:
    with pytest.raises(UserError, match=match):
        fulfillment_contract(fallback=fallback)


def test_the_fallback_is_a_copy_the_caller_cannot_change_later() -> None:
    mine = json.loads(json.dumps(FULFILLMENT_EXAMPLE))
    contract = OutputContract.from_schema(
        fulfillment_contract().schema, name="f", strict=False, fallback=mine
    )
    mine["fulfillment"]["speech"] = "changed"
    assert contract.fallback == FULFILLMENT_EXAMPLE


# --- truncation is the runtime's decision -------------------------------------------------


def test_calls_of_a_response_cut_by_the_output_limit_never_run_whatever_the_adapter_said() -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        if request.step:
            return ModelResponse(content=(TextBlock(text="sorry, that was too long"),))
        # a custom model that reports the cut but does not flag its calls
        call = ToolCall(id="c1", name="fetch", raw='{"page": "a"}', arguments={"page": "a"})
        return ModelResponse(content=(call,), finish_reason="length")

    result = Agent(FunctionModel(reply), tools=[fetch], trace_dir=False).run_sync("read a")

    assert RAN == []
    assert errors_of(result) == ["truncated_call"]
    assert result.metrics["tool_argument_truncation_count"] == 1
    first = next(m for m in result.messages if m.role == "assistant")
    assert all(c.truncated for c in first.tool_calls)  # type: ignore[union-attr]


# --- usage ----------------------------------------------------------------------------------


def _answer(usage: Usage) -> ModelResponse:
    return ModelResponse(content=(TextBlock(text="hello there"),), usage=usage)


def test_usage_the_provider_left_out_is_counted_and_says_so() -> None:
    # llama-cpp-python's server, streaming: no input figure, output estimated from chunks
    model = FunctionModel(lambda request: _answer(Usage(output_tokens=3)))
    result = Agent(model, trace_dir=False).run_sync("hi")

    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens == 3
    assert result.to_dict()["usage"]["source"] == "counted"


def test_usage_the_provider_reports_is_kept_as_reported() -> None:
    model = FunctionModel(lambda request: _answer(Usage(input_tokens=50, output_tokens=4)))
    result = Agent(model, trace_dir=False).run_sync("hi")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (50, 4)
    assert result.to_dict()["usage"]["source"] == "provider"


def test_usage_of_a_run_with_both_kinds_of_call_is_mixed() -> None:
    def reply(request: ModelRequest) -> Any:
        if request.step == 0:
            return {**fetches("a"), "usage": {"input_tokens": 40, "output_tokens": 9}}
        return {"text": "done"}  # no usage at all

    result = Agent(FunctionModel(reply), tools=[fetch], trace_dir=False).run_sync("read a")
    assert result.to_dict()["usage"]["source"] == "mixed"
    assert result.usage.input_tokens > 40


# --- token budget and the shape of Limits ---------------------------------------------------


def test_the_token_budget_is_on_by_default_and_stops_a_runaway_run() -> None:
    assert Limits().token_budget == 4_000_000
    huge = {"input_tokens": 1_500_000, "output_tokens": 10}
    model = FunctionModel(lambda request: {**fetches(f"p{request.step}"), "usage": huge})

    result = Agent(model, tools=[fetch], trace_dir=False).run_sync("read everything")

    assert (result.stop_reason, result.steps) == ("token_budget", 3)


def test_limits_are_plain_json_values() -> None:
    data = Limits(max_tool_calls=4).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert all(v is None or isinstance(v, int | float | bool) for v in data.values())
    assert Limits(**data) == Limits(max_tool_calls=4)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_steps": True},
        {"max_steps": "20"},
        {"max_steps": 2.5},
        {"token_budget": 0},
        {"max_tool_calls": 0},
        {"max_tool_calls": "4"},
        {"wall_clock_s": math.nan},
        {"wall_clock_s": math.inf},
        {"wall_clock_s": "60"},
        {"block_repeated_calls": "yes"},
        {"block_repeated_calls": 1},
    ],
)
def test_bad_limits_are_refused_with_a_clear_error(bad: dict[str, Any]) -> None:
    name = next(iter(bad))
    with pytest.raises(UserError, match=name):
        Limits(**bad)
