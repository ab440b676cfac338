"""The run repairs a model's answer unless the model's stream is one of Pi's that repairs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from pi_runtime import Agent
from pi_runtime.messages import TextBlock
from pi_runtime.models import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    ScriptedModel,
    StreamEvent,
    stream_is_repaired,
)
from pi_runtime.testing import FunctionModel

LONE = "a\ud800"


def test_pis_canned_models_are_trusted_to_repair_their_own_answers() -> None:
    assert stream_is_repaired(FunctionModel(lambda request: {"text": "ok"}))
    assert stream_is_repaired(ScriptedModel([{"text": "ok"}]))


class _Overridden(FunctionModel):
    async def complete(self, request: ModelRequest) -> ModelResponse:
        # skips FunctionModel's repair: the stream it feeds is no longer repaired
        return ModelResponse(content=(TextBlock(text=LONE),))


def test_a_subclass_overriding_complete_is_repaired_by_the_run(tmp_path: Path) -> None:
    model = _Overridden(lambda request: {"text": "unused"})

    result = Agent(model, trace_dir=tmp_path).run_sync("hi")

    assert not stream_is_repaired(model)
    assert result.output == "a\ufffd", result.error


def test_a_patched_stream_is_repaired_by_the_run(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: {"text": "unused"})

    async def stream(request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseDone(response=ModelResponse(content=(TextBlock(text=LONE),)))

    model.stream = stream  # type: ignore[method-assign]
    result = Agent(model, trace_dir=tmp_path).run_sync("hi")

    assert not stream_is_repaired(model)
    assert result.output == "a\ufffd", result.error


class _Own:
    name = "own"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseDone(response=await self.complete(request))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=(TextBlock(text=LONE),))

    async def aclose(self) -> None:
        return None


def test_a_users_own_model_is_repaired_by_the_run(tmp_path: Path) -> None:
    result = Agent(_Own(), trace_dir=tmp_path).run_sync("hi")

    assert not stream_is_repaired(_Own())
    assert result.output == "a\ufffd", result.error
