"""OpenTelemetry export, read back through the SDK's in-memory exporter and metric reader:
the span tree a run makes, the GenAI attributes every span must carry, errors, metrics,
and message content (off unless asked for, redacted when on)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from pi_runtime import Agent, Limits, ModelError, tool
from pi_runtime.models import ModelRequest
from pi_runtime.observe import otel
from pi_runtime.testing import FunctionModel, ScriptedModel, function_call, text

SECRET = "sk-live-0123456789abcdefghij"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"rain in {city}"


@tool(retries=0)
def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError("the weather service is down")


@tool
def leaky(city: str) -> str:
    """Returns a key it should not."""
    return f"rain; debug key {SECRET}"


@tool
async def stall(city: str) -> str:
    """Never answers in time."""
    await asyncio.sleep(30)
    return "too late"


class Export:
    """What runs exported: finished spans and collected metrics."""

    def __init__(self) -> None:
        self.spans_out = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def histogram(self, name: str) -> Any:
        data = self.reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        return metric
        raise AssertionError(f"no metric {name}")


def exporting(capture: bool) -> Iterator[Export]:
    export = Export()
    otel.configure(
        tracer_provider=export.tracer_provider,
        meter_provider=export.meter_provider,
        capture_content=capture,
    )
    try:
        yield export
    finally:
        otel._reset()


@pytest.fixture
def export() -> Iterator[Export]:
    yield from exporting(capture=False)


@pytest.fixture
def export_content() -> Iterator[Export]:
    yield from exporting(capture=True)


def weather_agent(**options: Any) -> Agent:
    model = ScriptedModel([function_call("get_weather", {"city": "Oslo"}), text("Rain.")])
    return Agent(model, tools=[get_weather], trace_dir=False, **options)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_has(span: ReadableSpan, expected: dict[str, Any]) -> None:
    got = attrs(span)
    assert {k: got.get(k) for k in expected} == expected, span.name


def test_a_run_is_an_invoke_agent_span_over_its_chat_and_tool_spans(export: Export) -> None:
    result = weather_agent().run_sync("Weather in Oslo?", session_id="s-tree")
    assert result.status == "completed"

    [run] = export.named("invoke_agent")
    chats = export.named("chat ")
    [tool_span] = export.named("execute_tool ")
    assert len(chats) == 2
    assert run.kind == SpanKind.INTERNAL
    assert tool_span.name == "execute_tool get_weather" and tool_span.kind == SpanKind.INTERNAL
    assert all(c.name == "chat scripted" for c in chats)
    assert all(c.kind == SpanKind.INTERNAL for c in chats)  # the model runs in this process
    for child in [*chats, tool_span]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    # every run of the session shares the session's trace, under the session's span id
    assert format(run.context.trace_id, "032x") == otel.session_trace_id("s-tree")
    assert run.parent is not None
    assert format(run.parent.span_id, "016x") == otel.session_span_id("s-tree")


def test_every_span_carries_the_required_genai_attributes(export: Export) -> None:
    result = weather_agent().run_sync("Weather in Oslo?", session_id="s-attrs")

    [run] = export.named("invoke_agent")
    assert_has(
        run,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "pi.scripted",
            "gen_ai.request.model": "scripted",
            "gen_ai.conversation.id": "s-attrs",
            "gen_ai.usage.input_tokens": result.usage.input_tokens,
            "gen_ai.usage.output_tokens": result.usage.output_tokens,
            "pi.run.id": result.run_id,
            "pi.stop_reason": "final_answer",
            "pi.status": "completed",
            "pi.truncation_count": 0,
            "pi.prompt.name": "system",
            "pi.prompt.version": "1",
        },
    )
    assert attrs(run)["gen_ai.response.finish_reasons"] == ("stop",)
    first, second = sorted(export.named("chat "), key=lambda s: attrs(s)["pi.step"])
    for chat in (first, second):
        a = attrs(chat)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "pi.scripted"
        assert a["gen_ai.request.model"] == "scripted"
        assert a["gen_ai.conversation.id"] == "s-attrs"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    total = sum(attrs(c)["gen_ai.usage.input_tokens"] for c in (first, second))
    assert total == result.usage.input_tokens
    [tool_span] = export.named("execute_tool ")
    call_id = result.messages[1].tool_calls[0].id  # type: ignore[union-attr]
    assert_has(
        tool_span,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.conversation.id": "s-attrs",
            "pi.tool.outcome": "ok",
        },
    )
    assert all("error.type" not in attrs(s) for s in export.spans())


def test_a_remote_model_is_a_client_span_named_for_its_model(export: Export) -> None:
    def answer(request: ModelRequest) -> dict[str, Any]:
        return {"text": "hello", "usage": {"input_tokens": 11, "output_tokens": 2}}

    agent = Agent(FunctionModel(answer, name="openai:gpt-4o-mini"), trace_dir=False)
    agent.run_sync("hi", session_id="s-client")

    [chat] = export.named("chat ")
    assert chat.name == "chat gpt-4o-mini" and chat.kind == SpanKind.CLIENT
    assert attrs(chat)["gen_ai.provider.name"] == "openai"
    assert attrs(chat)["gen_ai.request.model"] == "gpt-4o-mini"
    assert (
        attrs(chat)["gen_ai.usage.input_tokens"],
        attrs(chat)["gen_ai.usage.output_tokens"],
    ) == (11, 2)
    [run] = export.named("invoke_agent")
    assert attrs(run)["gen_ai.provider.name"] == "openai"


def test_a_model_error_sets_error_type_on_the_chat_and_the_run(export: Export) -> None:
    def fail(request: ModelRequest) -> dict[str, Any]:
        raise ModelError("HTTP 400: the request was malformed", transient=False)

    result = Agent(FunctionModel(fail, name="openai:gpt-4o"), trace_dir=False).run_sync("hi")
    assert result.stop_reason == "model_error"

    [chat] = export.named("chat ")
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "400"
    [run] = export.named("invoke_agent")
    assert run.status.status_code == StatusCode.ERROR
    assert attrs(run)["error.type"] == "model_error"
    duration = export.histogram("gen_ai.client.operation.duration")
    [point] = duration.data.data_points
    assert point.attributes["error.type"] == "400"


def test_a_retried_model_call_is_one_chat_span_per_attempt(export: Export) -> None:
    calls = []

    def flaky(request: ModelRequest) -> dict[str, Any]:
        calls.append(request)
        if len(calls) == 1:
            raise ModelError("the server is overloaded", transient=True)
        return {"text": "done"}

    limits = Limits(retry_base_s=0.001)
    agent = Agent(FunctionModel(flaky, name="openai:gpt-4o"), trace_dir=False, limits=limits)
    assert agent.run_sync("hi").status == "completed"

    failed, ok = sorted(export.named("chat "), key=lambda s: s.start_time or 0)
    assert failed.status.status_code == StatusCode.ERROR
    assert attrs(failed)["error.type"] == "transient_error"
    assert ok.status.status_code == StatusCode.UNSET and "error.type" not in attrs(ok)
    assert (ok.start_time or 0) >= (failed.end_time or 0)
    [run] = export.named("invoke_agent")
    assert "error.type" not in attrs(run)


def test_a_model_call_cut_off_by_the_clock_is_a_failed_chat_span(export: Export) -> None:
    async def stall(request: ModelRequest) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {"text": "too late"}

    limits = Limits(wall_clock_s=0.2)
    agent = Agent(FunctionModel(stall, name="openai:gpt-4o"), trace_dir=False, limits=limits)
    assert agent.run_sync("hi").stop_reason == "wall_clock"

    [chat] = export.named("chat ")
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "wall_clock"
    [run] = export.named("invoke_agent")
    assert attrs(run)["pi.stop_reason"] == "wall_clock" and attrs(run)["pi.guard"] == "wall_clock"


def test_a_tool_call_cut_off_by_the_clock_ends_its_span_cancelled(export: Export) -> None:
    model = ScriptedModel([function_call("stall", {"city": "Oslo"}), text("Done.")])
    agent = Agent(model, tools=[stall], trace_dir=False, limits=Limits(wall_clock_s=0.2))
    assert agent.run_sync("Weather?").stop_reason == "wall_clock"

    [tool_span] = export.named("execute_tool ")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert attrs(tool_span)["error.type"] == "cancelled"
    [run] = export.named("invoke_agent")
    assert tool_span.end_time is not None and run.end_time is not None
    assert tool_span.end_time <= run.end_time


def test_a_failing_tool_sets_error_type_on_its_span(export: Export) -> None:
    model = ScriptedModel([function_call("broken", {"city": "Oslo"}), text("Sorry.")])
    result = Agent(model, tools=[broken], trace_dir=False).run_sync("Weather?")
    kind = result.messages[2].error.kind  # type: ignore[union-attr]

    [tool_span] = export.named("execute_tool ")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert attrs(tool_span)["error.type"] == kind
    assert attrs(tool_span)["pi.tool.outcome"] == "error"


def test_a_guard_stop_names_the_guard_on_the_run(export: Export) -> None:
    model = ScriptedModel([function_call("get_weather", {"city": "Oslo"})] * 3)
    agent = Agent(model, tools=[get_weather], trace_dir=False, limits=Limits(max_steps=1))
    result = agent.run_sync("Weather?")
    assert result.stop_reason == "max_steps"

    [run] = export.named("invoke_agent")
    assert attrs(run)["pi.guard"] == "max_steps"
    assert attrs(run)["pi.stop_reason"] == "max_steps"
    assert any(e.name == "pi.guard" for e in run.events)


def test_token_and_duration_metrics_follow_the_conventions(export: Export) -> None:
    result = weather_agent().run_sync("Weather in Oslo?")

    usage = export.histogram("gen_ai.client.token.usage")
    assert usage.unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage.data.data_points}
    assert by_type["input"].sum == result.usage.input_tokens
    assert by_type["output"].sum == result.usage.output_tokens
    assert by_type["input"].count == 2
    assert by_type["input"].attributes["gen_ai.operation.name"] == "chat"
    assert by_type["input"].attributes["gen_ai.provider.name"] == "pi.scripted"
    assert tuple(by_type["input"].explicit_bounds) == (
        1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
        16777216, 67108864,
    )  # fmt: skip
    duration = export.histogram("gen_ai.client.operation.duration")
    assert duration.unit == "s"
    [point] = duration.data.data_points
    assert point.count == 2
    assert tuple(point.explicit_bounds)[:3] == (0.01, 0.02, 0.04)


CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


def test_message_content_stays_off_spans_by_default(export: Export) -> None:
    weather_agent().run_sync("What is the weather in Oslo, my secret city?")

    for span in export.spans():
        a = attrs(span)
        assert not set(CONTENT_KEYS) & set(a), span.name
        assert all("secret city" not in str(v) for v in a.values())
        assert all("secret city" not in str(e.attributes) for e in span.events)


def test_captured_content_is_recorded_with_secrets_redacted(
    export_content: Export, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEATHER_API_KEY", "hunter2-but-longer")
    model = ScriptedModel([function_call("leaky", {"city": "Oslo"}), text("Rain.")])
    agent = Agent(model, tools=[leaky], trace_dir=False, instructions="Weather helper.")
    agent.run_sync("Weather in Oslo? my key is hunter2-but-longer")

    [run] = export_content.named("invoke_agent")
    assert "Weather helper." in attrs(run)["gen_ai.system_instructions"]
    first, second = sorted(export_content.named("chat "), key=lambda s: attrs(s)["pi.step"])
    sent = json.loads(attrs(first)["gen_ai.input.messages"])
    assert sent[0]["role"] == "user" and "Weather in Oslo?" in sent[0]["parts"][0]["content"]
    answered = json.loads(attrs(first)["gen_ai.output.messages"])
    assert answered[0]["finish_reason"] == "tool_call"
    assert answered[0]["parts"][0]["name"] == "leaky"
    later = json.loads(attrs(second)["gen_ai.input.messages"])
    assert [m["role"] for m in later] == ["user", "assistant", "tool"]
    [tool_span] = export_content.named("execute_tool ")
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}
    assert "rain; debug key" in attrs(tool_span)["gen_ai.tool.call.result"]
    everything = json.dumps(
        [attrs(s) for s in export_content.spans()], ensure_ascii=False, default=str
    )
    assert SECRET not in everything
    assert "hunter2-but-longer" not in everything


def test_a_sub_agents_run_nests_under_the_call_that_started_it(export: Export) -> None:
    child = Agent(ScriptedModel([text("Child answer.")]), trace_dir=False)
    helper = child.as_tool("helper", "Answers sub-questions.")
    parent_model = ScriptedModel([function_call("helper", {"task": "sub"}), text("Done.")])
    Agent(parent_model, tools=[helper], trace_dir=False).run_sync("Ask the helper.")

    runs = export.named("invoke_agent")
    assert len(runs) == 2
    [nested] = [r for r in runs if r.name == "invoke_agent helper"]
    [outer] = [r for r in runs if r is not nested]
    [call] = export.named("execute_tool helper")
    assert nested.parent is not None and nested.parent.span_id == call.context.span_id
    assert nested.context.trace_id == outer.context.trace_id
    assert attrs(nested)["pi.parent_run.id"] == attrs(outer)["pi.run.id"]


def test_a_run_inside_an_application_span_joins_that_trace(export: Export) -> None:
    tracer = export.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle request") as outer:
        weather_agent().run_sync("Weather?", session_id="s-app")

    [run] = export.named("invoke_agent")
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    [link] = run.links
    assert format(link.context.trace_id, "032x") == otel.session_trace_id("s-app")


def test_a_waiting_call_ends_its_span_with_the_wait(export: Export) -> None:
    agent = weather_agent(approval=["get_weather"])
    result = agent.run_sync("Weather?")
    assert result.stop_reason == "awaiting_approval"

    [tool_span] = export.named("execute_tool ")
    assert attrs(tool_span)["pi.tool.outcome"] == "awaiting_approval"
    assert tool_span.status.status_code == StatusCode.UNSET
    [run] = export.named("invoke_agent")
    assert attrs(run)["pi.status"] == "awaiting"


def test_a_failing_exporter_never_breaks_the_run() -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the tracer is broken")

    otel.configure(tracer_provider=Broken(), meter_provider=MeterProvider())
    try:
        result = weather_agent().run_sync("Weather?")
        streamed = asyncio.run(_events_of(weather_agent()))
    finally:
        otel._reset()
    assert result.status == "completed"
    assert streamed[-1] == "run_finished"


async def _events_of(agent: Agent) -> list[str]:
    return [event.kind async for event in agent.run_stream("Weather?")]


def test_a_run_without_the_variables_exports_nothing(
    export: Export, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in otel.ENDPOINT_ENVS:
        monkeypatch.delenv(name, raising=False)
    otel._reset()  # as a fresh process: the environment decides, and says no
    weather_agent().run_sync("Weather?")
    assert otel.active() is None
    assert export.spans() == []
