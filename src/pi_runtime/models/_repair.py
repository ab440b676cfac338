"""What any model says reaches the run as writable text: lone surrogates become U+FFFD.

A provider can hand back text no encoder can write: an escaped `\\ud800` in the JSON of a
stream, or an emoji whose two UTF-16 halves arrive as escapes in two consecutive chunks.
Every adapter's output passes through here once: `repair_response` for a whole answer,
`repaired_stream` (or the `repairs_text` decorator on `stream`) for the live deltas.

Repair works on accumulated text, never on one delta alone, so halves that arrived apart
are joined into the one character they spell. Live deltas hold back a trailing high
surrogate until the next delta of the same channel, so a consumer that concatenates the
deltas gets the same text as the final response.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import replace
from typing import TypeVar

from ..messages import (
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    repair_fields,
    repair_text,
    repair_value,
)
from .base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)

__all__ = [
    "repair_response",
    "repaired_stream",
    "repairs_text",
    "stream_is_repaired",
    "trust_stream",
]

_M = TypeVar("_M")
_Channel = tuple[str, int]


_REPAIRING: dict[object, object] = {}
"""Stream functions that repair all they yield -> the `complete` they rely on (or None)."""


def trust_stream(stream: object, complete: object = None) -> None:
    """Records that `stream` yields only repaired events, given `complete` if not None."""
    _REPAIRING[stream] = complete


def stream_is_repaired(model: object) -> bool:
    """Whether `model.stream` is one of Pi's own that repairs every event it yields.

    Then the run need not repair the answer a second time. A user's model, a subclass
    that overrides `stream` (or the `complete` it calls), or a patched instance is not.
    """
    function = getattr(getattr(model, "stream", None), "__func__", None)
    if function is None or function not in _REPAIRING:
        return False
    complete = _REPAIRING[function]
    return (
        complete is None or getattr(getattr(model, "complete", None), "__func__", None) is complete
    )


def repair_response(response: ModelResponse) -> ModelResponse:
    """`response` with every string repaired; the very object when nothing needed it."""
    if _surely_clean(response):
        return response  # most answers: no need to walk them field by field
    return repair_fields(response)


_NUMBERS = frozenset({int, float, type(None)})
_PLAIN = frozenset({str, dict, list})


def _plain_clean(value: object) -> bool:
    """None, or a str, dict or list (JSON data) in which nothing needs repair."""
    return value is None or (type(value) in _PLAIN and repair_value(value) is value)


def _surely_clean(response: ModelResponse) -> bool:
    """True only when no string in `response` can hold a surrogate: it is made of the
    usual types and all its text is ASCII. False says nothing: `repair_fields` then looks
    at every field. A fraction of that walk for an answer of a few blocks (every answer
    of every model passes here)."""
    usage = response.usage
    if (
        type(response) is not ModelResponse
        or type(usage) is not Usage
        or type(usage.input_tokens) is not int
        or type(usage.output_tokens) is not int
        or type(usage.cached_tokens) is not int
        or type(usage.cost_usd) not in _NUMBERS
        or type(response.content) is not tuple
        or not _plain_clean(response.raw)
    ):
        return False
    texts = [response.finish_reason, response.model or ""]
    for block in response.content:
        # exact types: a subclass may add fields only the walk would look at
        if type(block) is ToolCall:
            if type(block.truncated) is not bool or not _plain_clean(block.arguments):
                return False
            texts += (block.id, block.name, block.raw, block.kind)
        elif type(block) is TextBlock:
            texts += (block.text, block.phase, block.kind)
        elif type(block) is ThinkingBlock:
            texts += (block.text, block.signature or "", block.kind)
        else:
            return False
    try:
        return "".join(texts).isascii()  # `join` takes nothing but strings
    except TypeError:
        return False


class _DeltaRepair:
    """Repairs live deltas, holding back a trailing high surrogate per channel."""

    def __init__(self) -> None:
        self.held: dict[_Channel, str] = {}

    def _pass(self, channel: _Channel, text: str) -> str:
        text = self.held.pop(channel, "") + text
        if text and "\ud800" <= text[-1] <= "\udbff":  # its low half may be in the next delta
            self.held[channel] = text[-1]
            text = text[:-1]
        return repair_text(text)

    def feed(self, event: StreamEvent) -> StreamEvent | None:
        """The event as it may be passed on; None when all it carried is held back."""
        if isinstance(event, TextDelta | ThinkingDelta):
            if not event.text:
                return event
            text = self._pass((event.kind, 0), event.text)
            if not text:
                return None
            return event if text == event.text else replace(event, text=text)
        if isinstance(event, ToolCallDelta):
            arguments = event.arguments_delta
            if arguments:
                arguments = self._pass(("tool_call", event.index), arguments)
                if not arguments and event.id is None and event.name is None:
                    return None
            # An id or a name comes whole in one delta: nothing to hold back.
            call_id = repair_text(event.id) if event.id is not None else None
            name = repair_text(event.name) if event.name is not None else None
            if (arguments, call_id, name) == (event.arguments_delta, event.id, event.name):
                return event
            return replace(event, id=call_id, name=name, arguments_delta=arguments)
        return event

    def flush(self) -> list[StreamEvent]:
        """A high surrogate still held when the answer ends has no partner: U+FFFD."""
        events: list[StreamEvent] = []
        for kind, index in self.held:
            if kind == "text_delta":
                events.append(TextDelta(text="\ufffd"))
            elif kind == "thinking_delta":
                events.append(ThinkingDelta(text="\ufffd"))
            else:
                events.append(ToolCallDelta(index=index, arguments_delta="\ufffd"))
        self.held.clear()
        return events


async def repaired_stream(
    events: AsyncIterator[StreamEvent],
) -> AsyncGenerator[StreamEvent, None]:
    """`events` with every delta and the final response repaired (see the module doc)."""
    repair = _DeltaRepair()
    try:
        async for event in events:
            if isinstance(event, ResponseDone):
                for held in repair.flush():
                    yield held
                yield ResponseDone(response=repair_response(event.response))
            elif (passed := repair.feed(event)) is not None:
                yield passed
    finally:
        # A consumer may stop at ResponseDone: close the adapter's stream (and its
        # connection) now rather than whenever the garbage collector gets to it.
        if isinstance(events, AsyncGenerator):
            await events.aclose()


def repairs_text(
    stream: Callable[[_M, ModelRequest], AsyncIterator[StreamEvent]],
) -> Callable[[_M, ModelRequest], AsyncIterator[StreamEvent]]:
    """Decorates an adapter's `stream` method so that all it yields is repaired."""

    @functools.wraps(stream)
    def repaired(self: _M, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return repaired_stream(stream(self, request))

    trust_stream(repaired)
    return repaired
