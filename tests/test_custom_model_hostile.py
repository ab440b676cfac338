"""A user's own `Model` class gets the same protection as Pi's adapters: its text is
repaired where it enters the run, and its errors are redacted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pi_runtime import Agent, ModelRequest, ModelResponse, TextBlock, ToolCall, tool
from pi_runtime.messages import has_surrogates
from pi_runtime.models import ResponseDone, StreamEvent, TextDelta, ToolCallDelta
from pi_runtime.observe import ModelDelta, read_trace

KEY = "sk-live-0123456789abcdefghijklmnop"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


class OwnModel:
    """A model written outside Pi: a lone surrogate in its text and in a tool call's
    arguments (as a raw character, not an escape), or an exception naming a key."""

    name = "own-model"

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseDone(response=await self.complete(request))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.fail:
            raise RuntimeError(f"upstream refused key {KEY}")
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(content=(TextBlock(text="done \ud800 here"),))
        call = ToolCall(
            id="c1", name="echo", arguments={"text": "a\udc00b"}, raw='{"text": "a\udc00b"}'
        )
        return ModelResponse(content=(call,), finish_reason="tool_calls")

    async def aclose(self) -> None:
        return None


def test_a_custom_models_lone_surrogates_are_repaired_not_an_internal_error(
    tmp_path: Path,
) -> None:
    result = Agent(OwnModel(), tools=[echo], trace_dir=tmp_path).run_sync("go")
    assert result.stop_reason == "final_answer", result.error
    assert result.output == "done \ufffd here"
    tool_result = result.messages[2]
    assert tool_result.role == "tool" and tool_result.content == "a\ufffdb"
    result.to_json().encode("utf-8")
    assert result.trace is not None
    assert read_trace(result.trace)[-1]["kind"] == "run_finished"


def test_a_custom_models_exception_naming_a_key_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = Agent(OwnModel(fail=True), trace_dir=tmp_path).run_sync("go")
    assert result.stop_reason == "model_error"
    assert KEY not in result.to_json()
    assert result.trace is not None
    assert KEY not in Path(result.trace).read_text(encoding="utf-8")


def test_a_prompt_and_history_with_lone_surrogates_are_repaired_where_they_enter(
    tmp_path: Path,
) -> None:
    from pi_runtime import UserMessage
    from pi_runtime.testing import ScriptedModel

    agent = Agent(ScriptedModel([{"text": "ok"}, {"text": "ok"}]), trace_dir=tmp_path)
    result = agent.run_sync("hi \ud83d", history=[UserMessage(content="earlier \udfff")])
    assert result.ok
    assert [m.content for m in result.messages if m.role == "user"] == [
        "earlier \ufffd",
        "hi \ufffd",
    ]
    result.to_json().encode("utf-8")


def test_a_prompt_that_is_not_text_is_a_user_error() -> None:
    from pi_runtime import UserError
    from pi_runtime.testing import ScriptedModel

    with pytest.raises(UserError, match="prompt must be a string"):
        Agent(ScriptedModel([{"text": "ok"}]), trace_dir=False).run_sync(42)  # type: ignore[arg-type]


class DeltaModel(OwnModel):
    """Streams its own deltas: lone surrogates in text, a call's id, name and arguments."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if any(m.role == "tool" for m in request.messages):
            yield TextDelta(text="done \ud800")
        else:
            yield ToolCallDelta(index=0, id="c\udc001", name="echo\ud800")
            yield ToolCallDelta(index=0, arguments_delta='{"text": "a\udc00b"}')
        yield ResponseDone(response=await self.complete(request))


def test_a_custom_models_live_deltas_are_repaired_before_anyone_sees_them() -> None:
    async def watch() -> list[ModelDelta]:
        stream = Agent(DeltaModel(), tools=[echo], trace_dir=False).run_stream("go")
        return [event async for event in stream if isinstance(event, ModelDelta)]

    deltas = asyncio.run(watch())

    assert deltas, "the model's deltas reach the stream"
    for delta in deltas:  # every string can be written as UTF-8 (an SSE body, a log)
        for text in (delta.delta, delta.tool_call_id or "", delta.name or ""):
            assert not has_surrogates(text), delta
    call = next(d for d in deltas if d.name)
    assert (call.tool_call_id, call.name) == ("c\ufffd1", "echo\ufffd")
