"""The Anthropic adapter against recorded Messages API exchanges (respx, no network).

The SDK runs on `httpx2`; respx routes `httpx` requests. `RespxTransport` carries each
request across, so the routes see (and record) exactly what the adapter sent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import respx

from pi_runtime import (
    Agent,
    AssistantMessage,
    Limits,
    ModelError,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserError,
    UserMessage,
    tool,
)
from pi_runtime.models import ModelSettings, ResponseDone, TextDelta, ThinkingDelta, ToolCallDelta
from pi_runtime.models.anthropic import REDACTED_THINKING_PREFIX, AnthropicModel

RECORDINGS = Path(__file__).parent / "recordings" / "anthropic"
API = "https://api.anthropic.com"


class RespxTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport answered by a respx router."""

    def __init__(self, router: respx.Router) -> None:
        self.router = router

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = httpx.Request(
            request.method,
            str(request.url),
            headers=list(request.headers.multi_items()),
            content=await request.aread(),
        )
        answer = await self.router.async_handler(sent)
        return httpx2.Response(
            answer.status_code,
            headers=list(answer.headers.multi_items()),
            content=await answer.aread(),
        )


def sse(name: str) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream; charset=utf-8"},
        content=(RECORDINGS / name).read_bytes(),
    )


def recorded_error(name: str) -> httpx.Response:
    case = json.loads((RECORDINGS / "errors.json").read_text())[name]
    return httpx.Response(case["status"], headers=case["headers"], json=case["body"])


def claude(router: respx.Router, **options: Any) -> AnthropicModel:
    client = httpx2.AsyncClient(transport=RespxTransport(router))
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", http_client=client, **options)


def mocked(*answers: httpx.Response) -> tuple[respx.Router, respx.Route]:
    router = respx.Router(base_url=API, assert_all_called=False)
    route = router.post("/v1/messages").mock(side_effect=list(answers))
    return router, route


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city on a date.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "date": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
REMINDER = ToolDefinition(
    name="create_reminder",
    description="Create a reminder.",
    parameters={
        "type": "object",
        "properties": {"title": {"type": "string"}, "time": {"type": "string"}},
        "required": ["title"],
        "additionalProperties": False,
    },
)


def ask(text: str = "明天北京天气，并创建提醒", **fields: Any) -> ModelRequest:
    return ModelRequest(
        system="You are a weather assistant.",
        messages=(UserMessage(content=text),),
        tools=(WEATHER, REMINDER),
        **fields,
    )


async def collect(model: AnthropicModel, request: ModelRequest) -> list[Any]:
    events = [event async for event in model.stream(request)]
    await model.aclose()
    return events


def test_streamed_tool_call_with_thinking_is_parsed_into_neutral_blocks() -> None:
    router, _ = mocked(sse("tool_use_with_thinking.txt"))
    events = asyncio.run(collect(claude(router), ask()))

    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert sum(isinstance(e, ResponseDone) for e in events) == 1
    response = done.response
    thinking, text, call = response.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.text.startswith("The user wants tomorrow's weather in Beijing and")
    assert thinking.signature is not None and thinking.signature.startswith("EqQBCkgIBxAB")
    assert text == TextBlock(text="I'll check the weather first.", phase="commentary")
    assert call == ToolCall(
        id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        name="get_weather",
        raw='{"city": "Beijing", "date": "2025-12-15"}',
        arguments={"city": "Beijing", "date": "2025-12-15"},
    )
    assert response.finish_reason == "tool_calls"
    assert response.model == "anthropic:claude-sonnet-4-6"
    # input counts every prompt token; cache writes are input, not cached reads
    assert (response.usage.input_tokens, response.usage.output_tokens) == (18 + 1612, 87)
    assert response.usage.cached_tokens == 0
    assert response.raw["stop_reason"] == "tool_use"
    assert response.raw["content"][2]["input"] == {"city": "Beijing", "date": "2025-12-15"}
    json.dumps(response.raw)  # the raw payload goes into traces as JSON

    deltas = [e for e in events if not isinstance(e, ResponseDone)]
    assert [e.text for e in deltas if isinstance(e, ThinkingDelta)] == [
        "The user wants tomorrow's weather in Beijing",
        " and a reminder. First get the weather.",
    ]
    assert "".join(e.text for e in deltas if isinstance(e, TextDelta)) == text.text
    calls = [e for e in deltas if isinstance(e, ToolCallDelta)]
    assert (calls[0].id, calls[0].name) == ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather")
    assert "".join(c.arguments_delta for c in calls) == call.raw


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("create_reminder", {"type": "tool", "name": "create_reminder"}),
    ],
)
def test_tool_choice_maps_to_anthropic_tool_choice(choice: str, expected: dict[str, str]) -> None:
    router, route = mocked(sse("final_answer.txt"))
    asyncio.run(collect(claude(router), ask(tool_choice=choice)))
    body = sent(route)
    assert body["tool_choice"] == expected
    assert [t["name"] for t in body["tools"]] == ["get_weather", "create_reminder"]
    assert body["tools"][0]["input_schema"] == WEATHER.parameters


def test_forcing_a_tool_without_tools_is_a_model_error_before_any_request() -> None:
    router, route = mocked(sse("final_answer.txt"))
    request = ModelRequest(system="", messages=(UserMessage(content="hi"),), tool_choice="required")
    with pytest.raises(ModelError, match="needs tools"):
        asyncio.run(collect(claude(router), request))
    assert not route.called


def test_cache_breakpoints_sit_on_the_stable_prefix_and_the_newest_message() -> None:
    router, route = mocked(sse("final_answer.txt"))
    asyncio.run(collect(claude(router), ask()))
    body = sent(route)
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You are a weather assistant.", "cache_control": ephemeral}
    ]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    marked = json.dumps(body).count('"cache_control"')
    assert marked == 3  # the API allows at most 4 breakpoints


def test_cache_can_be_turned_off() -> None:
    router, route = mocked(sse("final_answer.txt"))
    asyncio.run(collect(claude(router, cache=False), ask()))
    assert "cache_control" not in json.dumps(sent(route))


def test_cached_prefix_reads_are_reported_as_cached_tokens() -> None:
    router, _ = mocked(sse("final_answer.txt"))
    done = asyncio.run(collect(claude(router), ask()))[-1]
    usage = done.response.usage
    assert usage.cached_tokens == 1612
    assert usage.input_tokens == 64 + 141 + 1612
    assert done.response.finish_reason == "stop"
    assert done.response.content[1] == TextBlock(
        text="Tomorrow in Beijing: 31°C with rain. Take an umbrella.", phase="final"
    )


def test_thinking_blocks_and_tool_results_go_back_with_signatures_and_ids() -> None:
    router, route = mocked(sse("tool_use_with_thinking.txt"), sse("final_answer.txt"))
    model = claude(router, thinking=2048)

    async def two_turns() -> None:
        first = [e async for e in model.stream(ask())][-1].response
        call = first.tool_calls[0]
        follow_up = (
            *ask().messages,
            AssistantMessage(content=first.content, finish_reason="tool_calls", model=first.model),
            ToolResultMessage(
                tool_call_id=call.id, name=call.name, content='{"temp":31,"rain":true}'
            ),
        )
        await model.complete(_with(follow_up))
        await model.aclose()

    asyncio.run(two_turns())
    body = sent(route, 1)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    thinking = assistant["content"][0]
    assert thinking["type"] == "thinking"
    assert thinking["thinking"].startswith("The user wants tomorrow's weather")
    assert thinking["signature"].startswith("EqQBCkgIBxAB")
    assert assistant["content"][2] == {
        "type": "tool_use",
        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "name": "get_weather",
        "input": {"city": "Beijing", "date": "2025-12-15"},
    }
    result = body["messages"][2]
    assert result["role"] == "user"
    assert result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["tool_use_id"] == "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
    assert result["content"][0]["content"] == '{"temp":31,"rain":true}'
    assert "is_error" not in result["content"][0]


def _with(messages: tuple[Any, ...]) -> ModelRequest:
    return ModelRequest(
        system="You are a weather assistant.", messages=messages, tools=(WEATHER, REMINDER)
    )


def test_redacted_thinking_round_trips_as_opaque_data() -> None:
    router, route = mocked(sse("redacted_thinking.txt"), sse("final_answer.txt"))
    model = claude(router, thinking="adaptive")

    async def two_turns() -> ThinkingBlock:
        first = [e async for e in model.stream(ask())][-1].response
        call = first.tool_calls[0]
        await model.complete(
            _with(
                (
                    *ask().messages,
                    AssistantMessage(content=first.content, model=first.model),
                    ToolResultMessage(tool_call_id=call.id, name=call.name, content="sunny"),
                )
            )
        )
        await model.aclose()
        block = first.content[0]
        assert isinstance(block, ThinkingBlock)
        return block

    redacted = asyncio.run(two_turns())
    assert redacted.text == ""
    assert redacted.signature is not None
    assert redacted.signature.startswith(REDACTED_THINKING_PREFIX)
    body = sent(route, 1)
    assert body["thinking"] == {"type": "adaptive"}
    assert body["messages"][1]["content"][0] == {
        "type": "redacted_thinking",
        "data": redacted.signature.removeprefix(REDACTED_THINKING_PREFIX),
    }
    assert body["messages"][1]["content"][1]["input"] == {"city": "北京"}


def test_max_tokens_stop_marks_every_call_of_the_message_truncated() -> None:
    router, _ = mocked(sse("max_tokens_cut.txt"))
    response = asyncio.run(collect(claude(router), ask()))[-1].response
    assert response.finish_reason == "length"
    (call,) = response.tool_calls
    assert call.truncated
    assert call.raw == '{"title": "Weather'
    assert call.arguments is None
    assert response.raw["content"][1]["input"] == '{"title": "Weather'


REMINDERS: list[dict[str, Any]] = []


@tool(idempotent=False)
def create_reminder(title: str, time: str = "07:00") -> str:
    """Create a reminder.

    Args:
        title: what to be reminded of.
        time: when, HH:MM.
    """
    REMINDERS.append({"title": title, "time": time})
    return "ok"


def test_truncated_call_is_refused_by_the_gate_in_a_real_run() -> None:
    REMINDERS.clear()
    router, route = mocked(sse("max_tokens_cut.txt"), sse("final_answer.txt"))
    agent = Agent(claude(router), tools=[create_reminder], trace_dir=False)
    result = asyncio.run(agent.run("Remind me to take an umbrella"))

    assert REMINDERS == []  # the cut-off call never ran
    assert result.status == "completed"
    assert result.metrics["tool_argument_truncation_count"] == 1
    (refusal,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert refusal.is_error and refusal.error is not None
    assert refusal.error.kind == "truncated_call"
    assert refusal.tool_call_id == "toolu_01Vd4Rk9mPq2Ws7Xy3Zb5Cn8"
    # the model hears why: the refusal goes back under the call's id
    result_block = sent(route, 1)["messages"][2]["content"][0]
    assert result_block["tool_use_id"] == "toolu_01Vd4Rk9mPq2Ws7Xy3Zb5Cn8"
    assert result_block["is_error"] is True
    assert "truncated_call" in result_block["content"]


def test_rate_limit_response_is_transient_with_the_retry_after_hint() -> None:
    router, _ = mocked(recorded_error("rate_limited"))
    with pytest.raises(ModelError) as raised:
        asyncio.run(collect(claude(router), ask()))
    assert raised.value.transient
    assert raised.value.retry_after_s == 7.0
    assert "anthropic rate limit (HTTP 429, rate_limit_error)" in raised.value.message


def test_overloaded_response_is_transient() -> None:
    router, _ = mocked(recorded_error("overloaded"))
    with pytest.raises(ModelError) as raised:
        asyncio.run(collect(claude(router), ask()))
    assert raised.value.transient
    assert "overloaded (HTTP 529" in raised.value.message


def test_overloaded_error_event_inside_a_stream_is_transient() -> None:
    router, _ = mocked(sse("overloaded_midstream.txt"))
    with pytest.raises(ModelError) as raised:
        asyncio.run(collect(claude(router), ask()))
    assert raised.value.transient
    assert "overloaded" in raised.value.message


def test_rejected_key_is_unrecoverable_and_names_the_variable() -> None:
    router, _ = mocked(recorded_error("bad_key"))
    with pytest.raises(ModelError) as raised:
        asyncio.run(collect(claude(router), ask()))
    assert not raised.value.transient
    assert "ANTHROPIC_API_KEY" in raised.value.message
    assert "invalid x-api-key" in raised.value.message


def test_run_retries_a_rate_limit_then_completes() -> None:
    router, route = mocked(
        httpx.Response(
            429,
            headers={"retry-after": "0"},
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        ),
        sse("final_answer.txt"),
    )
    agent = Agent(claude(router), trace_dir=False, limits=Limits(retry_base_s=0.0))
    result = asyncio.run(agent.run("weather?"))
    assert result.status == "completed"
    assert route.call_count == 2
    assert result.output == "Tomorrow in Beijing: 31°C with rain. Take an umbrella."


def test_run_with_a_rejected_key_ends_with_model_error() -> None:
    router, route = mocked(recorded_error("bad_key"))
    agent = Agent(claude(router), trace_dir=False)
    result = asyncio.run(agent.run("weather?"))
    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert result.error is not None and "ANTHROPIC_API_KEY" in result.error
    assert route.call_count == 1  # not retried


def test_stream_cut_before_message_stop_is_a_transient_error() -> None:
    partial = (RECORDINGS / "final_answer.txt").read_text().split("event: message_delta")[0]
    router, _ = mocked(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=partial.encode())
    )
    with pytest.raises(ModelError, match="before message_stop") as raised:
        asyncio.run(collect(claude(router), ask()))
    assert raised.value.transient


def test_missing_api_key_is_a_user_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-6")


def test_key_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    router, route = mocked(sse("final_answer.txt"))
    model = AnthropicModel(
        "claude-sonnet-4-6", http_client=httpx2.AsyncClient(transport=RespxTransport(router))
    )
    asyncio.run(collect(model, ask()))
    headers = route.calls[0].request.headers
    assert "sk-ant-env" in (headers.get("x-api-key") or headers["authorization"])


def test_missing_sdk_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(UserError, match="pip install anthropic"):
        AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test")


@pytest.mark.parametrize("budget", [512, "lots", True])
def test_bad_thinking_setting_is_a_user_error(budget: Any) -> None:
    with pytest.raises(UserError, match="thinking"):
        AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", thinking=budget)


def test_settings_reach_the_request() -> None:
    router, route = mocked(sse("final_answer.txt"))
    request = ask(settings=ModelSettings(max_tokens=300, temperature=0.2))
    asyncio.run(collect(claude(router), request))
    body = sent(route)
    assert (body["max_tokens"], body["temperature"]) == (300, 0.2)
    assert body["stream"] is True
    assert body["model"] == "claude-sonnet-4-6"
