"""`ReplayModel`: answers with the responses recorded in a run's JSONL trace.

A trace line of kind `model_response` holds the turn it answered and the assistant
message in neutral form; replaying answers turn N with that message, so the replayed run
takes the same path as the recorded one when its tools behave the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..exceptions import ModelError, UserError
from ..messages import AssistantMessage, message_from_dict, read_json_lines
from ._deltas import replays_complete, stream_response
from .base import ModelRequest, ModelResponse, StreamEvent


def load_responses(path: str | Path) -> dict[int, ModelResponse]:
    """The recorded responses of a trace, by turn, text repaired (a bad trace is a `UserError`)."""
    try:
        events = read_json_lines(path)
    except OSError as exc:
        raise UserError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"cannot replay trace {exc}") from exc
    responses: dict[int, ModelResponse] = {}
    for number, event in enumerate(events, 1):
        if event.get("kind") != "model_response":
            continue
        try:
            turn, response = _recorded(event)
        except (KeyError, TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
            raise UserError(
                f"trace {path}: event {number} is not a model response Pi wrote "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        responses[turn] = response
    if not responses:
        raise UserError(f"trace {path} holds no model responses to replay")
    return responses


def _recorded(event: dict[str, Any]) -> tuple[int, ModelResponse]:
    message = message_from_dict(event["message"])
    if not isinstance(message, AssistantMessage):
        raise ValueError("a model response must be an assistant message")
    turn = event["turn"]
    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 0:
        raise ValueError(f"turn must be a whole number >= 0, got {turn!r}")
    response = ModelResponse(
        content=message.content,
        finish_reason=message.finish_reason,
        usage=message.usage,
        model=message.model,
        raw=event.get("raw"),
    )
    return turn, response


class ReplayModel:
    """Replays a recorded trace as a model."""

    def __init__(self, path: str | Path) -> None:
        self.responses = load_responses(path)
        self.name = f"replay:{path}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            return self.responses[request.step]
        except KeyError:
            raise ModelError(f"the trace has no response for turn {request.step}") from None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request)
        # closing the inner stream with this one spares the loop a finaliser wake-up
        async with contextlib.aclosing(stream_response(response)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        return None


replays_complete(ReplayModel.stream)
