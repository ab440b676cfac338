"""Hostile text on spans, exported by the SDK's real OTLP/HTTP exporters to a receiver on
127.0.0.1: a lone surrogate no longer fails the batch it is in (losing other runs' spans
and metrics), and every string on a span is bounded, captured conversations too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otlp_support import OtlpReceiver, ReceivedSpan
from pi_runtime import Agent, ModelError
from pi_runtime.messages import Usage
from pi_runtime.models import ModelRequest
from pi_runtime.observe import ModelErrorEvent, ModelRequested, RunFinished, RunStarted, otel
from pi_runtime.testing import FunctionModel, ScriptedModel, text

LIMIT_ENVS = ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")


@dataclass
class Exported:
    receiver: OtlpReceiver
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReceivedSpan]:
        """Everything exported so far, once the batch went out."""
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()
        return list(self.receiver.spans)


def exporting(capture: bool) -> Iterator[Exported]:
    with OtlpReceiver() as receiver:
        spans = BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint + "/v1/traces"))
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(spans)  # one batch: every run's spans together
        metrics = OTLPMetricExporter(endpoint=receiver.endpoint + "/v1/metrics")
        reader = PeriodicExportingMetricReader(metrics, export_interval_millis=3_600_000)
        meter_provider = MeterProvider(metric_readers=[reader])
        otel.configure(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture,
        )
        try:
            yield Exported(receiver, tracer_provider, meter_provider)
        finally:
            otel._reset()
            tracer_provider.shutdown()
            meter_provider.shutdown()


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Exported]:
    for name in LIMIT_ENVS:
        monkeypatch.delenv(name, raising=False)
    yield from exporting(capture=False)


def test_a_lone_surrogate_on_spans_costs_no_run_its_spans_or_metrics(otlp: Exported) -> None:
    Agent(ScriptedModel([text("fine")]), trace_dir=False).run_sync("hi", session_id="innocent")

    def fail(request: ModelRequest) -> dict[str, Any]:
        raise ModelError("bad \ud800 here", transient=False)

    hostile = FunctionModel(fail, name="openai:gpt \udcff")  # a name from undecodable bytes
    Agent(hostile, trace_dir=False).run_sync("hi", session_id="hostile")
    # events as any recorder may pass them on: an error text never repaired on the way
    listener = otel.listener(None)
    assert listener is not None
    for event in [
        RunStarted(run_id="r-raw", session_id="raw", model="m\ud800", system="", tools=(), limits={}),
        ModelRequested(turn=0, step=1, message_count=1, tool_choice="auto", tools=()),
        ModelErrorEvent(turn=0, step=1, message="bad \ud800 here", transient=False, attempt=1),
        RunFinished(status="failed", stop_reason="model_error", steps=1, output=None,
                    usage=Usage(), metrics={}, error="bad \ud800 here"),
    ]:  # fmt: skip
        listener(event)

    spans = otlp.spans()
    runs = {s.attributes["gen_ai.conversation.id"] for s in spans if s.name == "invoke_agent"}
    assert runs == {"innocent", "hostile", "raw"}
    chats = {s.name: s.status for s in spans if s.name.startswith("chat")}
    assert chats == {"chat scripted": "UNSET", "chat gpt \ufffd": "ERROR", "chat m\ufffd": "ERROR"}
    models = {
        point[0]["gen_ai.request.model"]
        for metric in otlp.receiver.metrics
        for point in metric.points
    }
    assert models == {"scripted", "gpt \ufffd", "m\ufffd"}


@pytest.mark.parametrize(("variable", "limit"), [(None, 16_384), ("2000", 2000)])
def test_strings_on_spans_are_bounded_and_captured_messages_keep_the_latest(
    variable: str | None, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in LIMIT_ENVS:
        monkeypatch.delenv(name, raising=False)
    if variable is not None:
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", variable)
    with contextmanager(exporting)(capture=True) as otlp:
        agent = Agent(ScriptedModel([text("ok " * 400), text("fine")]), trace_dir=False)
        first = agent.run_sync("x" * 100_000, session_id="long")
        agent.run_sync("again", session_id="long", history=first.messages)
        spans = otlp.spans()

    values = [v for s in spans for v in s.attributes.values() if isinstance(v, str)]
    assert max(map(len, values)) == limit  # the 100,000 characters, cut
    sent = sorted(
        (s.attributes["gen_ai.input.messages"] for s in spans if s.name.startswith("chat")), key=len
    )
    # the first call's one message, cut; the second's latest messages that fit, whole
    assert len(sent[1]) == limit and sent[1].endswith("…")
    latest = json.loads(sent[0])
    assert [(m["role"], m["parts"][0]["content"][:3]) for m in latest] == [
        ("assistant", "ok "),
        ("user", "aga"),
    ]


def test_the_span_limit_wins_over_the_general_one_and_a_bad_value_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pi_runtime.observe.otel._bounded import DEFAULT_LIMIT, limit_from_env

    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "500")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "200")
    assert limit_from_env() == 200
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "16k")
    with caplog.at_level("WARNING", logger="pi_runtime.observe.otel"):
        assert limit_from_env() == 500  # the bad one passed over, and said
    assert "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT='16k' is no whole number" in caplog.text
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "٣٠")  # digits, not ASCII ones
    assert limit_from_env() == DEFAULT_LIMIT
