"""How Pi's names become the GenAI conventions' (providers, models, servers, errors), and
the session trace ids every process must derive alike. No OpenTelemetry needed here."""

from __future__ import annotations

import pytest

from pi_runtime.observe import otel
from pi_runtime.observe.otel._names import ModelRef, agent_name, model_error_type, model_ref


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai:gpt-4o-mini", ModelRef("openai", "gpt-4o-mini")),
        ("anthropic:claude-sonnet-4-5", ModelRef("anthropic", "claude-sonnet-4-5")),
        ("deepseek:deepseek-chat", ModelRef("deepseek", "deepseek-chat")),
        ("ollama:qwen2.5:7b", ModelRef("ollama", "qwen2.5:7b")),
        (
            "openai-compatible:qwen@http://127.0.0.1:8080/v1",
            ModelRef("openai", "qwen", "127.0.0.1", 8080),
        ),
        (
            "deepseek:deepseek-chat@https://***@proxy.example/v1",
            ModelRef("deepseek", "deepseek-chat", "proxy.example", 443),
        ),
        ("local", ModelRef("llama_cpp", "local")),
        ("local:qwen2.5-coder-0.5b", ModelRef("llama_cpp", "qwen2.5-coder-0.5b")),
        ("scripted", ModelRef("pi.scripted", "scripted")),
        ("scripted:/home/someone/runs/script.json", ModelRef("pi.scripted", "script.json")),
        ("replay:/tmp/run-1.jsonl", ModelRef("pi.replay", "run-1.jsonl")),
        ("function:answer", ModelRef("pi.function", "answer")),
        ("text:openai:gpt-4o", ModelRef("openai", "gpt-4o")),
        ("my-model", ModelRef("_OTHER", "my-model")),
    ],
)
def test_a_models_name_gives_its_provider_model_and_server(name: str, expected: ModelRef) -> None:
    assert model_ref(name) == expected


def test_only_models_running_in_this_process_are_internal() -> None:
    assert model_ref("local").in_process and model_ref("scripted:x.json").in_process
    assert not model_ref("openai:gpt-4o").in_process
    assert not model_ref("openai-compatible:m@http://127.0.0.1:1/v1").in_process


@pytest.mark.parametrize(
    ("message", "transient", "expected"),
    [
        ("model call timed out: read timeout", True, "timeout"),
        ("HTTP 429: slow down", True, "429"),
        ("the provider answered status 503", True, "503"),
        ("connection reset", True, "transient_error"),
        ("the model refused the schema", False, "model_error"),
    ],
)
def test_model_errors_get_a_low_cardinality_error_type(
    message: str, transient: bool, expected: str
) -> None:
    assert model_error_type(message, transient=transient) == expected


def test_an_agent_file_names_its_agent() -> None:
    assert agent_name("/srv/agents/weather/agent.toml") == "weather"
    assert agent_name("/srv/agents/triage.toml") == "triage"
    assert agent_name(None) is None


def test_session_trace_ids_are_derived_alike_everywhere() -> None:
    # a worker of another release must put a session's runs in the same trace: the
    # derivation (sha256 of "pi.session:" + id: 16 bytes, then 8) is a wire format
    assert otel.session_trace_id("jobs-1") == "1ae1e70daecc9a05a1673483d60fdce3"
    assert otel.session_span_id("jobs-1") == "3fad4b83704b517b"
    assert otel.session_trace_id("jobs-1") != otel.session_trace_id("jobs-2")
    assert len(otel.session_trace_id("")) == 32 and len(otel.session_span_id("")) == 16


@pytest.mark.parametrize(
    ("value", "on"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("", False), ("no", False)],
)
def test_content_capture_reads_the_standard_variable(
    value: str, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(otel.CAPTURE_CONTENT_ENV, value)
    assert otel.capture_content_from_env() is on
