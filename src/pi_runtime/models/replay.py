"""`ReplayModel`: answers with the responses recorded in a run's JSONL trace.

A trace line of kind `model_response` holds the turn it answered and the assistant
message in neutral form; replaying answers turn N with that message, so the replayed run
takes the same path as the recorded one when its tools behave the same.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from ..exceptions import ModelError, UserError
from ..messages import AssistantMessage, message_from_dict
from ._canned import stream_response
from .base import ModelRequest, ModelResponse, StreamEvent


def load_responses(path: str | Path) -> dict[int, ModelResponse]:
    """The recorded responses of a trace, by turn."""
    p = Path(path)
    responses: dict[int, ModelResponse] = {}
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"cannot read trace {p}: {exc.strerror or exc}") from exc
    for number, line in enumerate(lines, 1):
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise UserError(f"trace {p} line {number} is not JSON: {exc}") from exc
        if event.get("kind") != "model_response":
            continue
        message = message_from_dict(event["message"])
        if not isinstance(message, AssistantMessage):
            raise UserError(
                f"trace {p} line {number}: a model response must be an assistant message"
            )
        responses[int(event["turn"])] = ModelResponse(
            content=message.content,
            finish_reason=message.finish_reason,
            usage=message.usage,
            model=message.model,
            raw=event.get("raw"),
        )
    if not responses:
        raise UserError(f"trace {p} holds no model responses to replay")
    return responses


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
        async for event in stream_response(response):
            yield event

    async def aclose(self) -> None:
        return None
