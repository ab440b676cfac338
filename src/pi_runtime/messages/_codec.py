"""Messages to and from plain JSON values, with one TypeAdapter for the whole union.

A user turn's `origin` is written only when it is not the default `user` (see
`UserMessage`), so a conversation of plain turns keeps the exact shape it had before
`origin` existed, and older readers skip the field (they ignore unknown keys).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from ._model import Message

_MESSAGE = TypeAdapter[Message](Annotated[Message, Field(discriminator="role")])
_MESSAGES = TypeAdapter[list[Message]](list[Annotated[Message, Field(discriminator="role")]])


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as JSON-ready data (the shape `RunResult.messages` and traces use)."""
    data: dict[str, Any] = _MESSAGE.dump_python(message, mode="json")
    return data


def message_from_dict(data: dict[str, Any]) -> Message:
    """Parse one message written by `message_to_dict` (raises pydantic's ValidationError)."""
    return _MESSAGE.validate_python(data)


def messages_to_list(messages: list[Message] | tuple[Message, ...]) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = _MESSAGES.dump_python(list(messages), mode="json")
    return data


def messages_from_list(data: list[dict[str, Any]]) -> list[Message]:
    return _MESSAGES.validate_python(data)
