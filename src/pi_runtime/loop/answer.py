"""Reading one model answer: deltas passed on live, the final response made writable."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..exceptions import ModelError
from ..models import (
    Model,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    repair_response,
    repaired_stream,
    stream_is_repaired,
    stream_replays_complete,
)
from ..observe import Event, ModelDelta


class AnswerReader:
    """Reads a model's answers for one run.

    What the model's methods are (Pi's own canned stream or not) is looked at once, when
    the run starts, not on every call.
    """

    def __init__(self, model: Model, live: Callable[[Event], None] | None) -> None:
        self.model = model
        self.live = live
        # nobody watches the deltas and the stream would only replay `complete`'s answer:
        # ask `complete` for the same response at the same moment, without a generator
        # and its delta objects
        self.whole = live is None and stream_replays_complete(model)
        self.repaired = stream_is_repaired(model)

    async def read(
        self, request: ModelRequest, started: float
    ) -> tuple[ModelResponse, float | None, float | None]:
        """The model's response to `request`, when its first tool call began (None without
        one) and when its first token came (any delta, or the response itself), in ms
        since `started`. Deltas go to the listener as they arrive."""
        if self.whole:
            response = await self.model.complete(request)
            return self._finished(response, None, _ms_since(started), started)
        first_tool_at: float | None = None
        first_token_at: float | None = None
        live = self.live
        call_ids: dict[int, str] = {}  # a call's later deltas carry only its index
        stream = self.model.stream(request)
        if not self.repaired:  # a user's model: its deltas go live, so they are repaired too
            stream = repaired_stream(stream)
        try:
            async for event in stream:
                if first_token_at is None:
                    first_token_at = _ms_since(started)
                if isinstance(event, ResponseDone):
                    return self._finished(event.response, first_tool_at, first_token_at, started)
                if isinstance(event, ToolCallDelta):
                    if first_tool_at is None:
                        first_tool_at = _ms_since(started)
                    if live is not None:
                        if event.id:
                            call_ids[event.index] = event.id
                        live(
                            ModelDelta(
                                turn=request.step,
                                delta=event.arguments_delta,
                                channel="tool_call",
                                tool_call_id=call_ids.get(event.index),
                                name=event.name,
                            )
                        )
                elif live is not None and isinstance(event, TextDelta | ThinkingDelta):
                    if isinstance(event, TextDelta):
                        live(ModelDelta(turn=request.step, delta=event.text, channel="text"))
                    else:
                        live(ModelDelta(turn=request.step, delta=event.text, channel="thinking"))
        finally:
            # closed here, not by the garbage collector: its finaliser hook would wake the
            # event loop through its self-pipe, a system call and a loop pass per model call
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        raise ModelError(f"model {self.model.name!r} ended its stream without a response")

    def _finished(
        self,
        response: ModelResponse,
        first_tool_at: float | None,
        first_token_at: float | None,
        started: float,
    ) -> tuple[ModelResponse, float | None, float | None]:
        # any Model's answer, a user's own included, enters the run as writable text; Pi's
        # own models have repaired theirs already
        if not self.repaired:
            response = repair_response(response)
        if first_tool_at is None and response.tool_calls:
            first_tool_at = _ms_since(started)
        return response, first_tool_at, first_token_at


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
