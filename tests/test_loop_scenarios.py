"""Scenario tests of the run: tool choice, tool calls, metrics, traces, replay, resume."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import (
    Agent,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RunResult,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserError,
    UserMessage,
    tool,
)
from pi_runtime.context import count_tokens
from pi_runtime.messages import messages_to_list
from pi_runtime.testing import (
    FunctionModel,
    ScriptedModel,
    function_call,
    parallel_calls,
    text,
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WEATHER_SCRIPT = ROOT / "examples" / "weather" / "script.json"


def tool_results(result: RunResult) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


def assistant_messages(result: RunResult) -> list[AssistantMessage]:
    return [m for m in result.messages if isinstance(m, AssistantMessage)]


LOOKUPS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    LOOKUPS.append(key)
    return f"value of {key}"


@tool
def convert(amount: float, currency: str) -> dict[str, Any]:
    """Convert an amount to euros.

    Args:
        amount: the amount.
        currency: its currency code.
    """
    return {"eur": round(amount * 0.5, 2), "from": currency}


@pytest.fixture(autouse=True)
def _clear_lookups() -> None:
    LOOKUPS.clear()


LOOKUP_THEN_ANSWER = [
    function_call("lookup", {"key": "x"}, text="Let me look that up first."),
    text("x has a value."),
]


# --- one-shot tool choice -----------------------------------------------------------------


def test_next_tool_choice_applies_to_the_first_model_call_only(tmp_path: Path) -> None:
    model = ScriptedModel(LOOKUP_THEN_ANSWER)
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?", next_tool_choice="required")

    assert result.stop_reason == "final_answer"
    assert [r.tool_choice for r in model.requests] == ["required", "auto"]
    requested = [e.tool_choice for e in result.events if e.kind == "model_request"]
    assert requested == ["required", "auto"]


def test_a_named_tool_choice_is_sent_to_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(LOOKUP_THEN_ANSWER)
    agent = Agent(model, tools=[lookup, convert], trace_dir=tmp_path)

    result = agent.run_sync("what is x?", next_tool_choice="lookup")

    assert result.stop_reason == "final_answer"
    assert [r.tool_choice for r in model.requests] == ["lookup", "auto"]


def test_next_tool_choice_does_not_carry_over_to_the_next_run(tmp_path: Path) -> None:
    model = ScriptedModel([*LOOKUP_THEN_ANSWER, text("again")])
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    first = agent.run_sync("what is x?", next_tool_choice="required")
    agent.run_sync("and now?", history=first.messages)

    assert [r.tool_choice for r in model.requests] == ["required", "auto", "auto"]


@pytest.mark.parametrize("choice", ["always", "get_weather", ""])
def test_an_invalid_tool_choice_is_refused_before_the_run(tmp_path: Path, choice: str) -> None:
    model = ScriptedModel(LOOKUP_THEN_ANSWER)
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    with pytest.raises(UserError, match=r"tool choice must be .* may call \(lookup\); got '"):
        agent.run_sync("what is x?", next_tool_choice=choice)

    assert model.requests == []
    assert list(tmp_path.iterdir()) == []


def test_a_tool_choice_outside_allow_is_refused(tmp_path: Path) -> None:
    model = ScriptedModel(LOOKUP_THEN_ANSWER)
    agent = Agent(model, tools=[lookup, convert], allow=["lookup"], trace_dir=tmp_path)

    with pytest.raises(UserError, match=r"may call \(lookup\); got 'convert'"):
        agent.run_sync("what is x?", next_tool_choice="convert")
    assert model.requests == []


# --- tool calls ---------------------------------------------------------------------------


def test_parallel_calls_get_their_results_in_the_models_order(tmp_path: Path) -> None:
    finished: list[str] = []

    @tool
    async def fetch(name: str, wait_ms: int) -> str:
        """Fetch a record.

        Args:
            name: the record.
            wait_ms: how long the backend takes.
        """
        await asyncio.sleep(wait_ms / 1000)
        finished.append(name)
        return f"record {name}"

    # The first call is the slowest, so completion order is the reverse of call order.
    model = ScriptedModel(
        [
            parallel_calls(
                function_call("fetch", {"name": "a", "wait_ms": 60}),
                function_call("fetch", {"name": "b", "wait_ms": 30}),
                function_call("fetch", {"name": "c", "wait_ms": 0}),
            ),
            text("fetched all three"),
        ]
    )
    agent = Agent(model, tools=[fetch], trace_dir=tmp_path)

    result = agent.run_sync("fetch a, b and c")

    assert result.stop_reason == "final_answer"
    assert sorted(finished) == ["a", "b", "c"]
    [caller, *_] = assistant_messages(result)
    ids = [c.id for c in caller.tool_calls]
    assert len(set(ids)) == 3
    results = tool_results(result)
    assert [m.tool_call_id for m in results] == ids
    assert [m.content for m in results] == ["record a", "record b", "record c"]
    # The results come right after the message that asked for them, in one block.
    index = result.messages.index(caller)
    assert list(result.messages[index + 1 : index + 4]) == results


def test_a_truncated_tool_call_is_not_executed(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            parallel_calls(
                function_call("lookup", {"key": "complete-looking"}),
                function_call("lookup", '{"key": "cut of'),
                text="Looking up both.",
                finish_reason="length",
            ),
            text("My output was cut; here is a shorter answer."),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("look both up")

    assert result.stop_reason == "final_answer"
    assert LOOKUPS == []
    assert result.metrics["tool_argument_truncation_count"] == 2
    results = tool_results(result)
    assert [m.error.kind for m in results if m.error] == ["truncated_call", "truncated_call"]
    assert all(m.is_error for m in results)
    # The model's next request carries those results.
    seen = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [json.loads(m.content)["kind"] for m in seen] == ["truncated_call"] * 2
    executed = [e.executed for e in result.events if e.kind == "tool_result"]
    assert executed == [False, False]


def test_malformed_json_arguments_go_back_to_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("lookup", '{"key": "x",,}'),
            function_call("lookup", {"key": "x"}),
            text("x has a value."),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert result.output == "x has a value."
    first, second = tool_results(result)
    assert first.is_error and first.error is not None
    assert first.error.kind == "invalid_arguments"
    body = json.loads(first.content)
    assert set(body) == {"kind", "message", "hint"}
    assert body["hint"]
    assert not second.is_error
    assert LOOKUPS == ["x"]
    # The malformed text is kept verbatim, for the model and for replay.
    bad_call = assistant_messages(result)[0].tool_calls[0]
    assert bad_call.raw == '{"key": "x",,}'
    assert bad_call.arguments is None


def test_arguments_failing_the_schema_are_not_executed(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("convert", {"amount": "lots", "currency": "USD", "extra": 1}),
            text("could not convert"),
        ]
    )
    agent = Agent(model, tools=[convert], trace_dir=tmp_path)

    result = agent.run_sync("convert")

    [answer] = tool_results(result)
    assert answer.error is not None and answer.error.kind == "invalid_arguments"
    assert "amount" in answer.error.message
    assert [e.executed for e in result.events if e.kind == "tool_result"] == [False]


# --- text phases and metrics --------------------------------------------------------------


def test_text_beside_tool_calls_is_commentary_and_the_answer_is_final(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(LOOKUP_THEN_ANSWER), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")

    phases = [
        [b.phase for b in m.content if isinstance(b, TextBlock)] for m in assistant_messages(result)
    ]
    assert phases == [["commentary"], ["final"]]


def test_text_phases_are_set_by_the_runtime_not_trusted_from_the_model(tmp_path: Path) -> None:
    def mislabelling(request: ModelRequest) -> ModelResponse:
        if request.step == 0:
            return ModelResponse(
                content=(
                    TextBlock(text="checking", phase="final"),
                    ToolCall(id="c1", name="lookup", raw='{"key":"x"}', arguments={"key": "x"}),
                ),
                finish_reason="tool_calls",
            )
        return ModelResponse(content=(TextBlock(text="x is set", phase="commentary"),))

    agent = Agent(FunctionModel(mislabelling), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")

    phases = [
        [b.phase for b in m.content if isinstance(b, TextBlock)] for m in assistant_messages(result)
    ]
    assert phases == [["commentary"], ["final"]]
    assert result.output == "x is set"


def test_metrics_count_the_preamble_and_mixed_messages(tmp_path: Path) -> None:
    preamble = "Let me check the weather and the exchange rate for your trip first."
    model = ScriptedModel(
        [
            function_call("lookup", {"key": "weather"}, text=preamble),
            function_call("lookup", {"key": "rate"}),
            function_call("convert", {"amount": 10, "currency": "USD"}),
            text("All set."),
        ]
    )
    agent = Agent(model, tools=[lookup, convert], trace_dir=tmp_path)

    result = agent.run_sync("plan my trip")

    metrics = result.metrics
    assert metrics["text_tokens_before_first_tool_call"] == count_tokens(preamble) > 0
    # One of the three tool-calling messages also carried text.
    assert metrics["mixed_text_tool_message_rate"] == pytest.approx(1 / 3, abs=1e-3)
    assert isinstance(metrics["time_to_first_tool_call_ms"], int | float)
    assert metrics["time_to_first_tool_call_ms"] >= 0
    assert metrics["tool_argument_truncation_count"] == 0
    assert metrics["model_calls"] == 4
    assert metrics["tool_calls"] == 3


def test_metrics_of_a_run_without_tool_calls(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel([text("Hello there.")]), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("hi")

    assert result.metrics["time_to_first_tool_call_ms"] is None
    assert result.metrics["text_tokens_before_first_tool_call"] == 0
    assert result.metrics["mixed_text_tool_message_rate"] == 0.0


def test_metrics_of_tool_calls_without_preamble(tmp_path: Path) -> None:
    model = ScriptedModel([function_call("lookup", {"key": "x"}), text("done")])
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("x?")

    assert result.metrics["text_tokens_before_first_tool_call"] == 0
    assert result.metrics["mixed_text_tool_message_rate"] == 0.0
    assert result.metrics["time_to_first_tool_call_ms"] is not None


# --- RunResult and trace ------------------------------------------------------------------


def test_run_result_json_has_the_contract_keys(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(LOOKUP_THEN_ANSWER), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")
    data = json.loads(result.to_json())

    contract = {"status", "stop_reason", "output", "steps", "usage", "metrics", "messages"}
    assert contract | {"trace"} <= set(data)
    assert {"input_tokens", "output_tokens", "cached_tokens"} <= set(data["usage"])
    assert data["usage"]["source"] == "counted"  # the script reports no usage
    assert {
        "text_tokens_before_first_tool_call",
        "time_to_first_tool_call_ms",
        "mixed_text_tool_message_rate",
        "tool_argument_truncation_count",
    } <= set(data["metrics"])
    assert data["status"] == "completed"
    assert data["stop_reason"] == "final_answer"
    assert data["output"] == "x has a value."
    assert data["steps"] == 2
    assert data["trace"] == result.trace
    assert data["messages"] == messages_to_list(result.messages)
    [answer] = [m for m in data["messages"] if m["role"] == "tool"]
    assert answer["tool_call_id"] == "call_0_0"
    assert answer["is_error"] is False


def read_lines(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_the_trace_holds_every_event_and_message_once(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(LOOKUP_THEN_ANSWER), tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("what is x?")

    assert result.trace is not None
    assert Path(result.trace).parent == tmp_path
    lines = read_lines(result.trace)
    for line in lines:
        assert {"kind", "seq", "t_ms"} <= set(line)
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    assert lines[0]["kind"] == "run_started"
    assert lines[-1]["kind"] == "run_finished"
    assert lines[-1]["stop_reason"] == "final_answer"
    messages = [line for line in lines if line["kind"] == "message"]
    assert [m["index"] for m in messages] == list(range(len(result.messages)))
    assert [m["message"] for m in messages] == messages_to_list(result.messages)
    kinds = {line["kind"] for line in lines}
    assert {"model_request", "model_response", "tool_result", "transition"} <= kinds


def test_each_model_request_can_be_rebuilt_from_the_trace(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            parallel_calls(
                function_call("lookup", {"key": "a"}), function_call("lookup", {"key": "b"})
            ),
            function_call("lookup", {"key": "c"}, text="between"),
            text("done"),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    result = agent.run_sync("look up a, b, c", next_tool_choice="required")

    lines = read_lines(result.trace)
    started = lines[0]
    messages = [line["message"] for line in lines if line["kind"] == "message"]
    requests = [line for line in lines if line["kind"] == "model_request"]
    assert len(requests) == len(model.requests) == 3
    runtime = started["runtime"]
    for line, sent in zip(requests, model.requests, strict=True):
        # the request = the first message_count messages, the runtime block in front of
        # the current user message, minus any dropped ranges (none at this size)
        rebuilt = [dict(m) for m in messages[: line["message_count"]]]
        anchor = line["context"]["anchor"]
        rebuilt[anchor]["content"] = f"{runtime}\n\n{rebuilt[anchor]['content']}"
        assert line["context"]["dropped"] == []
        assert rebuilt == messages_to_list(sent.messages)
        assert line["tool_choice"] == sent.tool_choice
        assert line["tools"] == [d.name for d in sent.tools]
        assert started["system"] == sent.system


def test_replaying_a_trace_reproduces_the_run(tmp_path: Path) -> None:
    script = [
        parallel_calls(
            function_call("lookup", {"key": "x"}),
            function_call("convert", {"amount": 3, "currency": "USD"}),
            text="Checking.",
            usage={"input_tokens": 100, "output_tokens": 20},
        ),
        function_call("lookup", '{"key": '),
        function_call("lookup", '{"key": "y', finish_reason="length"),
        text("x has a value; 3 USD is 1.5 EUR.", usage={"input_tokens": 150}),
    ]
    recorded = Agent(ScriptedModel(script), tools=[lookup, convert], trace_dir=tmp_path)
    original = recorded.run_sync("what is x, and 3 USD in EUR?")
    assert original.trace is not None

    replayer = Agent(
        model="replay:" + original.trace, tools=[lookup, convert], trace_dir=tmp_path / "replay"
    )
    replayed = replayer.run_sync("what is x, and 3 USD in EUR?")

    assert messages_to_list(replayed.messages) == messages_to_list(original.messages)
    assert replayed.stop_reason == original.stop_reason == "final_answer"
    assert replayed.steps == original.steps == 4
    assert replayed.output == original.output
    assert replayed.usage == original.usage


def test_a_session_resumes_at_the_right_script_step(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call("lookup", {"key": "x"}),
            text("x is known."),
            function_call("lookup", {"key": "y"}),
            text("y is known too."),
        ]
    )
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    first = agent.run_sync("what is x?")
    second = agent.run_sync("and y?", history=first.messages)

    assert first.output == "x is known."
    assert second.output == "y is known too."
    assert second.steps == 2
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[len(first.messages)] == UserMessage(content="and y?")
    assert LOOKUPS == ["x", "y"]
    assert [r.step for r in model.requests] == [0, 1, 2, 3]
    ids = [c.id for m in assistant_messages(second) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 2


def test_a_fresh_script_model_resumes_a_session_from_its_history(tmp_path: Path) -> None:
    steps = [
        function_call("lookup", {"key": "x"}),
        text("x is known."),
        text("resumed in another process."),
    ]
    first = Agent(ScriptedModel(steps), tools=[lookup], trace_dir=tmp_path).run_sync("x?")

    # A new model object (as in another process) continues from the conversation alone.
    model = ScriptedModel(steps)
    second = Agent(model, tools=[lookup], trace_dir=tmp_path).run_sync(
        "more?", history=first.messages
    )

    assert second.output == "resumed in another process."
    assert [r.step for r in model.requests] == [2]


# --- entry points -------------------------------------------------------------------------


def test_run_is_awaitable(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(LOOKUP_THEN_ANSWER), tools=[lookup], trace_dir=tmp_path)

    result = asyncio.run(agent.run("what is x?"))

    assert (result.status, result.output) == ("completed", "x has a value.")


def test_run_stream_yields_events_until_the_run_finishes(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(LOOKUP_THEN_ANSWER), tools=[lookup], trace_dir=tmp_path)

    async def consume() -> tuple[Any, list[Any]]:
        stream = agent.run_stream("what is x?")
        assert stream.result is None
        return stream, [event async for event in stream]

    stream, events = asyncio.run(consume())

    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert kinds.count("run_finished") == 1
    deltas = [e for e in events if e.kind == "model_delta"]
    assert {"text", "tool_call"} <= {d.channel for d in deltas}
    text = "".join(d.delta for d in deltas if d.channel == "text")
    assert "Let me look that up first." in text
    assert stream.result is not None
    assert stream.result.output == "x has a value."
    assert events[-1].stop_reason == stream.result.stop_reason == "final_answer"
    # Deltas are live-only: the recorded events leave them out, the stream has them all else.
    assert [e for e in events if e.kind != "model_delta"] == list(stream.result.events)


def test_run_sync_inside_an_event_loop_is_a_user_error(tmp_path: Path) -> None:
    model = ScriptedModel(LOOKUP_THEN_ANSWER)
    agent = Agent(model, tools=[lookup], trace_dir=tmp_path)

    async def misuse() -> None:
        with pytest.raises(UserError, match="await"):
            agent.run_sync("what is x?")

    asyncio.run(misuse())
    assert model.requests == []


# --- the weather example ------------------------------------------------------------------


def test_weather_example_completes_and_the_reminder_gets_an_idempotency_key(
    tmp_path: Path,
) -> None:
    from examples.weather import tools as weather

    before = set(weather.REMINDERS)
    agent = Agent(model=f"scripted:{WEATHER_SCRIPT}", tools=weather.TOOLS, trace_dir=tmp_path)

    result = agent.run_sync("北京 12 月 5 日天气怎么样？要是下雨提醒我带伞。")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert result.steps == 3
    assert not [e for e in result.events if e.kind == "guard"]
    assert all(not m.is_error for m in tool_results(result))
    new_keys = set(weather.REMINDERS) - before
    assert len(new_keys) == 1
    [key] = new_keys
    assert key.startswith("pi-")
    assert weather.REMINDERS[key] == {"text": "带伞", "when": "2026-12-05 08:00"}
    finished = {e.name: e for e in result.events if e.kind == "tool_result"}
    assert finished["create_reminder"].idempotency_key == key
    assert finished["get_weather"].idempotency_key is None
    reminder = json.loads(tool_results(result)[1].content)
    assert reminder["created"] is True
    assert reminder["reminder_id"] == key[-12:]
    assert result.usage.input_tokens == 412 + 498 + 590
