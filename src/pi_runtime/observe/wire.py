"""Events on the wire: one `TypeAdapter` writes them as JSON and reads them back.

Every event class carries `kind: Literal[...]`, so the union is discriminated by it: a
reader picks the class from `kind` without trying the others. Traces write with it and a
stream to a browser can send the same bytes.

The serializer is pydantic-core's, chosen by measurement: nine events of a typical turn
took ~290 µs through the hand-rolled dict walk plus `json.dumps` it replaces and ~16 µs
through `dump_json`. msgspec (~3 µs) and orjson (~9 µs) are faster still, but orjson only
writes, msgspec reads tagged unions of its own Structs rather than these dataclasses, and
the difference is a few percent of a turn; pydantic is already a dependency.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, get_args

from pydantic import Discriminator, TypeAdapter
from pydantic_core import PydanticSerializationError, SchemaSerializer

from ..messages import Message, repair_fields
from .events import Event, LoopPhase, MessageAppended, ModelResponded, Transition


@functools.cache
def _union() -> TypeAdapter[Event]:
    """The whole union, for reading events and `event_to_dict`: built on first use (about
    30 ms), since a process that only writes traces never needs it."""
    return TypeAdapter[Event](Annotated[Event, Discriminator("kind")])


_EVENT_CLASSES = frozenset(get_args(Event))
_BY_CLASS: dict[type, SchemaSerializer] = {}
"""One serializer per class writes the union's bytes without its dispatch (~2 µs an
event), called directly: `dump_json`'s keyword plumbing costs a third of a small one."""


def _serializer(kind: type) -> SchemaSerializer:
    """The serializer for events of class `kind`, built on its first event: a run writes
    about ten of the 28, and building all of them cost each process about 35 ms."""
    serializer = _BY_CLASS.get(kind)
    if serializer is None:
        built = TypeAdapter(kind) if kind in _EVENT_CLASSES else _union()
        serializer = _BY_CLASS[kind] = built.serializer
    return serializer


# Inside JSON strings only (JSON's own syntax is ASCII), and each of these UTF-8 sequences
# spells one character alone: replacing the bytes escapes exactly those characters.
_LINE_BREAKS = (
    (b"\xc2\x85", b"\\u0085"),
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
)


_MESSAGES: dict[type, SchemaSerializer] = {
    kind: TypeAdapter(kind).serializer for kind in get_args(Message)
}
_RESPONSE_HEAD: set[str] = {"kind", "turn", "step", "message"}
"""What a model response line holds before its raw payload: written by hand around the
message, the rest by the class's serializer."""

_last: tuple[object, bytes] = (None, b"")
"""The last message written, and its JSON: a model's answer is written twice in a row,
in its `model_response` line and in the `message` line that appends it."""


def _message_json(message: Message) -> bytes | None:
    """`message` as JSON through its own class's serializer (None: not a message)."""
    global _last
    if _last[0] is message:
        return _last[1]
    serializer = _MESSAGES.get(type(message))
    if serializer is None:
        return None
    body = serializer.to_json(message, fallback=str, warnings=False)
    _last = (message, body)
    return body


_TRANSITIONS = {
    (source, target): b'{"kind":"transition","source":"%b","target":"%b","step":'
    % (source.encode(), target.encode())
    for source in get_args(LoopPhase)
    for target in get_args(LoopPhase)
}
"""A transition line up to its step, by phases: nothing in them to escape."""


def _dump(event: Event) -> bytes:
    if type(event) is Transition and type(event.step) is int:
        # four a turn: the line is written as a format
        head = _TRANSITIONS.get((event.source, event.target))
        if head is not None:
            return b"%b%d}" % (head, event.step)
    # Through a union of classes pydantic goes by way of Python objects (~1.5 µs a
    # message): a message is written by its own class's serializer and spliced in.
    # Values of unknown types (a provider's raw response object) are written as their str.
    if type(event) is MessageAppended and type(event.index) is int:
        body = _message_json(event.message)
        if body is not None:
            return b'{"kind":"message","index":%d,"message":%b}' % (event.index, body)
    elif type(event) is ModelResponded and type(event.turn) is int and type(event.step) is int:
        body = _message_json(event.message)
        if body is not None:
            tail = _serializer(ModelResponded).to_json(
                event, exclude=_RESPONSE_HEAD, fallback=str, warnings=False
            )
            return b'{"kind":"model_response","turn":%d,"step":%d,"message":%b,%b' % (
                event.turn,
                event.step,
                body,
                tail[1:],
            )
    return _serializer(type(event)).to_json(event, fallback=str, warnings=False)


def event_to_json(event: Event) -> bytes:
    """An event as one line of compact JSON (no newline), `kind` first.

    Lone surrogates become U+FFFD, and no character is left that a line splitter breaks
    on (U+0085, U+2028, U+2029 are escaped), as `messages.json_line` does for any value.
    Raises ValueError when the event holds a value no JSON can spell (a cycle, nesting
    past pydantic's depth limit).
    """
    try:
        data = _dump(event)
    except PydanticSerializationError as exc:
        # Repaired only when needed (no encoder writes a lone surrogate), and only then: a
        # cyclic value would keep the repair walking for ever.
        if "surrogates not allowed" not in str(exc):
            raise ValueError(f"cannot write a {event.kind} event: {exc}") from exc
        try:
            data = _dump(repair_fields(event))
        except PydanticSerializationError as again:
            raise ValueError(f"cannot write a {event.kind} event: {again}") from again
    # `isascii` first: most lines are ASCII, and it is ten times cheaper than a search
    if not data.isascii() and (b"\xe2\x80" in data or b"\xc2\x85" in data):
        for raw, escaped in _LINE_BREAKS:
            data = data.replace(raw, escaped)
    return data


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event as JSON-ready data, `kind` first (the shape of a trace line)."""
    data: dict[str, Any] = _union().dump_python(
        repair_fields(event), mode="json", fallback=str, warnings=False
    )
    return data


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event a trace line or `event_to_dict` spells; unknown keys (`seq`, `t_ms`) ignored.

    Raises pydantic's ValidationError (a ValueError) for an unknown kind or a bad field.
    """
    return _union().validate_python(data)
