"""A complete response as stream deltas, and raw tool-call arguments as a dict.

Shared by the canned models (scripted, function, replay), which replay whole responses
as a provider would stream them, and by every adapter that parses tool arguments.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from ..exceptions import ModelError
from ..messages import TextBlock, ThinkingBlock, ToolCall, parse_object
from .base import ModelResponse, ResponseDone, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta

MAX_ANSWER_CHARS = 4 * 1024 * 1024
"""Characters of text, thinking and arguments one answer may stream: past any output
limit a model has, so more is a server gone wrong, or a small compressed response that
unpacks to gigabytes. The adapters refuse it as it streams, before it fills memory."""


class AnswerSize:
    """Counts what an answer streamed so far, and refuses it past `MAX_ANSWER_CHARS`."""

    __slots__ = ("chars", "provider")

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.chars = 0

    def add(self, piece: str) -> str:
        """`piece`, counted (ModelError once the answer passes the limit)."""
        self.chars += len(piece)
        if self.chars > MAX_ANSWER_CHARS:
            raise ModelError(
                f"{self.provider}'s answer passed {MAX_ANSWER_CHARS:,} characters: refused",
                transient=False,
            )
        return piece


_REPLAYS: set[object] = set()
"""`stream` functions that only replay, as deltas, what their model's `complete` returns."""


def replays_complete(stream: object) -> None:
    """Records that `stream` yields nothing but the deltas of what `complete` returns."""
    _REPLAYS.add(stream)


def stream_replays_complete(model: object) -> bool:
    """Whether `model.stream` only replays `model.complete`'s answer.

    Then a caller that wants no deltas may call `complete` instead and get the same answer
    at the same moment. A subclass that overrides `stream`, or a patched instance, is not
    known to replay.
    """
    return getattr(getattr(model, "stream", None), "__func__", None) in _REPLAYS


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """The JSON object in `raw`, or None when it is not one (the gate reports why)."""
    return parse_object(raw)[0]


async def stream_response(response: ModelResponse) -> AsyncGenerator[StreamEvent, None]:
    """Replay a complete response as the deltas a streaming provider would send."""
    index = 0
    for block in response.content:
        if isinstance(block, TextBlock):
            if block.text:
                yield TextDelta(text=block.text)
        elif isinstance(block, ThinkingBlock):
            yield ThinkingDelta(text=block.text)
        elif isinstance(block, ToolCall):
            yield ToolCallDelta(index=index, id=block.id, name=block.name)
            if block.raw:
                yield ToolCallDelta(index=index, arguments_delta=block.raw)
            index += 1
    yield ResponseDone(response=response)
