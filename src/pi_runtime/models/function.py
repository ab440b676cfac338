"""`FunctionModel`: a model whose answers come from a Python callable."""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

from ._deltas import replays_complete, stream_response
from ._repair import repair_response, trust_stream
from .base import ModelRequest, ModelResponse, StreamEvent
from .scripted import ScriptStep, step_response

FunctionResult: TypeAlias = ModelResponse | dict[str, Any]
ModelFunction: TypeAlias = Callable[[ModelRequest], FunctionResult | Awaitable[FunctionResult]]


class FunctionModel:
    """Answers each request with `function(request)`.

    The function (plain or async) returns a `ModelResponse`, or a dict in the script-step
    shape (`{"text": ..., "tool_calls": [...]}`) for brevity.

    `keep_calls=False` keeps no copies: a copy holds the whole conversation, so keeping
    one per call makes a long run quadratic (a benchmark measures the runtime, not that).
    `context_window` is the window the model reports (None: unknown).
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str | None = None,
        keep_calls: bool = True,
        context_window: int | None = None,
    ) -> None:
        self.function = function
        self.context_window = context_window
        self.name = name or f"function:{getattr(function, '__name__', 'anonymous')}"
        self.keep_calls = keep_calls
        self.calls: list[ModelRequest] = []
        """A detached copy of each request, in order (none when `keep_calls` is off)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.keep_calls:
            self.calls.append(copy.deepcopy(request))
        result = self.function(request)
        # a plain answer first: `isawaitable` asks an ABC, which costs more than the check
        if not isinstance(result, ModelResponse | dict) and inspect.isawaitable(result):
            result = await result
        if not isinstance(result, ModelResponse):
            result = step_response(ScriptStep.model_validate(result), request.step, self.name)
        return repair_response(result)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request)
        # closing the inner stream with this one spares the loop a finaliser wake-up
        async with contextlib.aclosing(stream_response(response)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        return None


# stream yields the deltas of what complete returns, and complete repairs it
trust_stream(FunctionModel.stream, FunctionModel.complete)
replays_complete(FunctionModel.stream)
