"""How the run reads a model's stream: it closes the stream itself once the response is in,
and asks a canned model for its answer directly when nobody watches the deltas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from pi_runtime import Agent, ModelRequest, ModelResponse, TextBlock
from pi_runtime.models import ResponseDone, StreamEvent, stream_replays_complete
from pi_runtime.testing import FunctionModel, ReplayModel, ScriptedModel, function_call, text
from pi_runtime.tools import tool


@tool
def noop(i: int) -> int:
    """Return i."""
    return i


class ClosingModel:
    """Answers "ok"; notes which task closes its stream and whether the run had ended."""

    name = "closing"

    def __init__(self) -> None:
        self.closed_in: list[asyncio.Task[object] | None] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            yield ResponseDone(response=ModelResponse(content=(TextBlock(text="ok"),)))
        finally:
            self.closed_in.append(asyncio.current_task())

    async def aclose(self) -> None:
        return None


class PlainIterator:
    """A stream that is an async iterator but not a generator: it has no `aclose`."""

    def __init__(self) -> None:
        self.sent = False

    def __aiter__(self) -> PlainIterator:
        return self

    async def __anext__(self) -> StreamEvent:
        if self.sent:
            raise StopAsyncIteration
        self.sent = True
        return ResponseDone(response=ModelResponse(content=(TextBlock(text="plain"),)))


class PlainModel:
    name = "plain"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return PlainIterator()

    async def aclose(self) -> None:
        return None


def test_the_run_closes_the_models_stream_itself_before_it_returns(tmp_path: Path) -> None:
    # left to the garbage collector, the stream would be closed later, by another task
    # the event loop is woken to start
    model = ClosingModel()

    async def main() -> tuple[asyncio.Task[object] | None, list[asyncio.Task[object] | None]]:
        result = await Agent(model, trace_dir=tmp_path).run("hi")
        assert result.output == "ok"
        return asyncio.current_task(), list(model.closed_in)

    task, closed_when_the_run_returned = asyncio.run(main())

    assert closed_when_the_run_returned == [task]


def test_a_stream_without_aclose_is_read_as_before(tmp_path: Path) -> None:
    result = Agent(PlainModel(), trace_dir=tmp_path).run_sync("hi")

    assert result.stop_reason == "final_answer", result.error
    assert result.output == "plain"


def test_pis_canned_models_are_known_to_replay_their_complete() -> None:
    assert stream_replays_complete(ScriptedModel([text("ok")]))
    assert stream_replays_complete(FunctionModel(lambda request: {"text": "ok"}))
    assert not stream_replays_complete(ClosingModel())


class _OwnStream(FunctionModel):
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseDone(response=ModelResponse(content=(TextBlock(text="streamed"),)))


def test_a_subclass_with_its_own_stream_is_read_through_it(tmp_path: Path) -> None:
    model = _OwnStream(lambda request: {"text": "completed"})

    result = Agent(model, trace_dir=tmp_path).run_sync("hi")

    assert not stream_replays_complete(model)
    assert result.output == "streamed", result.error


def test_a_patched_stream_is_read_through_it(tmp_path: Path) -> None:
    model = ScriptedModel([text("completed")])

    async def stream(request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseDone(response=ModelResponse(content=(TextBlock(text="streamed"),)))

    model.stream = stream  # type: ignore[method-assign]
    result = Agent(model, trace_dir=tmp_path).run_sync("hi")

    assert result.output == "streamed", result.error


def test_a_canned_answer_read_without_its_stream_records_what_the_stream_would(
    tmp_path: Path,
) -> None:
    # the recorded run is replayed twice: once read whole (no listener), once as deltas
    steps = [function_call("noop", {"i": 1}), text("done")]
    recorded = Agent(ScriptedModel(steps), tools=[noop], trace_dir=tmp_path).run_sync("go")
    assert recorded.trace is not None
    replay = Agent(ReplayModel(recorded.trace), tools=[noop], trace_dir=tmp_path)

    whole = replay.run_sync("go")

    async def watched() -> list[str]:
        stream = replay.run_stream("go")
        return [e.kind async for e in stream]

    streamed_kinds = asyncio.run(watched())
    assert whole.output == recorded.output == "done", whole.error
    responses = [e for e in whole.events if e.kind == "model_response"]
    assert [e.message for e in responses] == [
        e.message for e in recorded.events if e.kind == "model_response"
    ]
    assert responses[0].first_tool_call_at_ms is not None
    assert responses[1].first_tool_call_at_ms is None
    assert whole.metrics["time_to_first_tool_call_ms"] is not None
    assert "model_delta" in streamed_kinds
    assert [k for k in streamed_kinds if k != "model_delta"] == [e.kind for e in whole.events]
