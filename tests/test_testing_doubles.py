"""The public test doubles check what they were asked: `calls`, `assert_complete()` and the
script builders in `pi_runtime.testing`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pi_runtime import Agent, ModelError, tool
from pi_runtime.messages import ToolCall, UserMessage
from pi_runtime.models import ModelRequest, ToolDefinition, resolve_model
from pi_runtime.testing import (
    FunctionModel,
    ScriptedModel,
    function_call,
    parallel_calls,
    text,
    tool_call,
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def request_with_tool(parameters: dict[str, object]) -> ModelRequest:
    return ModelRequest(
        system="",
        messages=(UserMessage(content="hi"),),
        tools=(ToolDefinition(name="add", description="", parameters=parameters),),
    )


def test_calls_are_snapshots_a_later_change_does_not_reach() -> None:
    model = ScriptedModel([text("ok")])
    parameters: dict[str, object] = {"type": "object"}

    asyncio.run(model.complete(request_with_tool(parameters)))
    parameters["type"] = "changed"

    assert model.calls[0].tools[0].parameters == {"type": "object"}


def test_function_model_records_snapshots_too() -> None:
    model = FunctionModel(lambda request: {"text": "ok"})
    parameters: dict[str, object] = {"type": "object"}

    asyncio.run(model.complete(request_with_tool(parameters)))
    parameters.clear()

    assert [call.tools[0].parameters for call in model.calls] == [{"type": "object"}]


def test_function_model_without_keep_calls_keeps_no_copies() -> None:
    # a copy per call holds the whole conversation: a long run would grow quadratically
    model = FunctionModel(lambda request: {"text": "ok"}, keep_calls=False)

    response = asyncio.run(model.complete(request_with_tool({"type": "object"})))

    assert response.to_message().text == "ok"
    assert model.calls == []


def test_assert_complete_names_the_steps_never_asked_for() -> None:
    model = ScriptedModel([text("one"), text("two"), text("three")])
    Agent(model, trace_dir=False).run_sync("hi")

    with pytest.raises(AssertionError, match=r"steps \[1, 2\] were never asked for"):
        model.assert_complete()


def test_assert_complete_passes_when_the_run_used_the_whole_script() -> None:
    model = ScriptedModel([function_call("add", {"a": 2, "b": 3}), text("5")])
    result = Agent(model, tools=[add], trace_dir=False).run_sync("2+3?")

    model.assert_complete()
    assert result.output == "5"
    assert [call.step for call in model.calls] == [0, 1]


def test_a_scripted_model_named_by_a_spec_keeps_no_requests_and_still_checks_its_script(
    tmp_path: Path,
) -> None:
    # a worker or server builds it once and serves every run with it: keeping each
    # request would hold every conversation it ever saw
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "one"}, {"text": "two"}]}))
    model = resolve_model(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    agent = Agent(model, trace_dir=False)
    for _ in range(3):
        assert agent.run_sync("hi").output == "one"

    assert model.calls == [] and model.requests == []
    with pytest.raises(AssertionError, match=r"steps \[1\] were never asked for"):
        model.assert_complete()


def test_asking_past_the_script_is_still_a_model_error() -> None:
    model = ScriptedModel([])

    with pytest.raises(ModelError, match="script has 0 steps"):
        asyncio.run(model.complete(request_with_tool({})))
    assert len(model.calls) == 1


def test_function_call_builds_a_step_the_loop_executes() -> None:
    model = ScriptedModel(
        [
            parallel_calls(
                function_call("add", {"a": 1, "b": 1}),
                function_call("add", {"a": 2, "b": 2}, id="second"),
            ),
            text("done", usage={"input_tokens": 4}),
        ]
    )
    result = Agent(model, tools=[add], trace_dir=False).run_sync("add twice")

    seen = [m for m in model.calls[1].messages if m.role == "tool"]
    assert [m.content for m in seen] == ["2", "4"]
    assert [m.tool_call_id for m in seen] == ["call_0_0", "second"]
    assert result.output == "done"


def test_text_passes_other_step_fields_through() -> None:
    step = text("done", usage={"input_tokens": 4}, thinking="why")

    assert (step.text, step.thinking, step.usage.input_tokens) == ("done", "why", 4)


def test_function_call_keeps_raw_text_arguments_as_written() -> None:
    step = function_call("add", '{"a": 1,')

    assert step.tool_calls[0].arguments == '{"a": 1,'


def test_tool_call_parses_an_object_and_keeps_a_non_object_unparsed() -> None:
    assert tool_call("add", {"a": 1}) == ToolCall(
        id="call_1", name="add", raw='{"a":1}', arguments={"a": 1}
    )
    assert tool_call("add", "[1]", id="c", truncated=True).arguments is None
