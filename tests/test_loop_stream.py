"""How the run reads a model's stream: it closes the stream itself once the response is in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from pi_runtime import Agent, ModelRequest, ModelResponse, TextBlock
from pi_runtime.models import ResponseDone, StreamEvent


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
