"""`AnthropicModel`: Claude through the official `anthropic` SDK (Messages API, streamed).

- Tool choice: `auto` → auto, `required` → any, a tool name → tool, `none` → none.
- `stop_reason == "max_tokens"` → finish `length`, and every tool call of that message is
  `truncated` (the gate refuses it).
- Thinking blocks keep their signature (redacted ones their opaque data) and go back
  verbatim, so tool use with extended thinking works across turns.
- Prompt caching: breakpoints on the last tool, the system prompt and the newest message,
  so each step of a run reads the previous step's prefix from the cache.
- With a thinking *budget* the API refuses a forced tool choice (`required` or a tool
  name) with a clear 400, which ends the run as `model_error`; `"adaptive"` accepts it.
- Failures become `ModelError` (see `classify.py`); the SDK's own retries are off so that
  the run's retries are the only ones, and each is in the trace.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any, Literal

from ..exceptions import ModelError, UserError
from ..messages import (
    Block,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    keep_secret,
    token_figure,
)
from ._anthropic_request import PROVIDER, REDACTED_THINKING_PREFIX, Thinking, anthropic_body
from ._client import LoopBoundClient
from ._deltas import AnswerSize, parse_arguments
from ._malformed import malformed, plain, usage_of, wrong
from ._repair import repairs_text
from .base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    complete_from_stream,
)
from .classify import API_KEY_VARIABLES, classify_provider_error
from .windows import known_window

__all__ = ["REDACTED_THINKING_PREFIX", "AnthropicModel", "anthropic_body"]

DEFAULT_MAX_TOKENS = 4096
_EXTRA_BODY = ("temperature",)
_LENGTH_STOPS = ("max_tokens", "model_context_window_exceeded")


class AnthropicModel:
    """Claude as a Pi model.

    Args:
        model: the model id, e.g. `claude-sonnet-4-6`.
        api_key: the key; default `$ANTHROPIC_API_KEY`.
        base_url: another endpoint speaking the Messages API (a proxy, a gateway).
        thinking: a token budget (>= 1024) for extended thinking, `"adaptive"`, or None.
        max_tokens: output limit when the request's settings give none.
        cache: place prompt-cache breakpoints (tools, system, newest message).
        timeout_s: how long the server may go without sending any of the answer (from
            the request to its first event, and between events; pings do not count).
        http_client: an `httpx2.AsyncClient` for the SDK (tests pass a mock transport).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        thinking: Thinking = None,
        max_tokens: int | None = None,
        cache: bool = True,
        timeout_s: float = 600.0,
        http_client: Any = None,
    ) -> None:
        if not model:
            raise UserError("anthropic needs a model name: anthropic:MODEL")
        budget = thinking if isinstance(thinking, int) and not isinstance(thinking, bool) else 0
        if thinking not in (None, "adaptive") and budget < 1024:
            raise UserError(
                f"thinking must be 'adaptive' or a budget of at least 1024 tokens, got {thinking!r}"
            )
        sdk = _import_sdk()
        variable = API_KEY_VARIABLES[PROVIDER]
        key = api_key or os.environ.get(variable)
        if not key:
            raise UserError(
                f"anthropic:{model} needs an API key: set {variable} "
                "(create one at console.anthropic.com), or pick another --model"
            )
        self.model = model
        self.name = f"{PROVIDER}:{model}"
        self.thinking = thinking
        self.max_tokens = max_tokens or (budget + DEFAULT_MAX_TOKENS)
        self.cache = cache
        self._sdk = sdk
        keep_secret(key)  # a gateway's key given here: no variable names it to redact
        self._timeout_s = timeout_s
        self._options = {"api_key": key, "base_url": base_url, "timeout": timeout_s}
        # a given http client is the caller's to keep on one loop; else the adapter's own
        # client lives as long as the model, re-made on a new event loop
        self._given: Any = (
            self._new_client(http_client=http_client) if http_client is not None else None
        )
        self._own: LoopBoundClient[Any] = LoopBoundClient(self._new_client)

    def _new_client(self, **extra: Any) -> Any:
        # Retries are the runtime's job (with events and backoff), not the SDK's.
        return self._sdk.AsyncAnthropic(max_retries=0, **self._options, **extra)

    @repairs_text
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        body = anthropic_body(
            request,
            model=self.model,
            max_tokens=request.settings.max_tokens or self.max_tokens,
            thinking=self.thinking,
            cache=self.cache,
        )
        state = _StreamState()
        client = self._given or await self._own.get()
        # the SDK's timeout bounds each read, and a ping is one: a server dripping pings
        # never ended. Each event of the answer must come within timeout_s of the last.
        deadline = _next_deadline(self._timeout_s)
        try:
            # sampling settings newer SDKs no longer list still reach the API, which decides
            extra = {key: body.pop(key) for key in _EXTRA_BODY if key in body}
            async with asyncio.timeout_at(deadline):
                stream = await client.messages.create(**body, stream=True, extra_body=extra)
            async with stream:
                events = aiter(stream)
                while True:
                    try:
                        async with asyncio.timeout_at(deadline):  # between yields only
                            event = await anext(events)
                    except StopAsyncIteration:
                        break
                    data = plain(event)
                    if not (isinstance(data, dict) and data.get("type") == "ping"):
                        deadline = _next_deadline(self._timeout_s)
                    for out in state.feed(data):
                        yield out
        except Exception as exc:
            raise classify_provider_error(exc, provider=PROVIDER) from exc
        yield ResponseDone(response=state.response(self.model))

    @property
    def context_window(self) -> int | None:
        """The model's published context window (`models.windows`), None when unknown."""
        return known_window(self.model)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self, request)

    async def aclose(self) -> None:
        """Close the adapter's client (and one made over a given `http_client`)."""
        await self._own.aclose()
        if self._given is not None:
            await self._given.close()


class _StreamState:
    """Folds Messages API stream events into deltas and, at the end, one response.

    Events are read as the JSON they came as, each field checked before use: one of the
    wrong shape ends the call with an error naming it. Blocks of a type Pi does not know
    (newer ones) stay in the raw payload only; a null text is empty; a tool_use `input`
    given as a string is read as the JSON text of the arguments (the gate checks them).
    """

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, list[str]] = {}
        self.call_index: dict[int, int] = {}
        self.stopped = False
        # text and thinking arrive in small deltas: joined once at the end, since adding
        # each to the block's string copies all before it (quadratic on a long answer)
        self.pieces: dict[tuple[int, str], list[str]] = {}
        self.size = AnswerSize(PROVIDER)

    def feed(self, event: object) -> list[StreamEvent]:
        if not isinstance(event, dict):
            raise wrong(PROVIDER, "an event of the stream", event, "an object")
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if not isinstance(message, dict):
                raise wrong(PROVIDER, "message_start's message", message, "an object")
            self.message = {**message, "content": [], "usage": usage_of(message.get("usage"))}
        elif kind == "content_block_start":
            return self._start(_index_of(event), event.get("content_block"))
        elif kind == "content_block_delta":
            index = _index_of(event)
            if index not in self.blocks:
                raise malformed(PROVIDER, f"content block {index} has a delta but no start")
            delta = event.get("delta")
            if not isinstance(delta, dict):
                raise wrong(PROVIDER, f"the delta of content block {index}", delta, "an object")
            return self._delta(index, delta)
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if not isinstance(delta, dict):
                raise wrong(PROVIDER, "message_delta's delta", delta, "an object")
            self.message.update({k: v for k, v in delta.items() if v is not None})
            usage = self.message.setdefault("usage", {})
            usage.update({k: v for k, v in usage_of(event.get("usage")).items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _start(self, index: int, block: object) -> list[StreamEvent]:
        if not isinstance(block, dict):
            raise wrong(PROVIDER, f"content block {index}", block, "an object")
        block = dict(block)
        kind = block.get("type")
        if not isinstance(kind, str):
            raise wrong(PROVIDER, f"the type of content block {index}", kind, "a string")
        for key in _TEXT_FIELDS.get(kind, ()):
            value, where = block.get(key), f"the {key} of content block {index} ({kind})"
            if value is not None and not isinstance(value, str):
                raise wrong(PROVIDER, where, value, "a string")
            if not value and kind == "tool_use":
                raise malformed(PROVIDER, f"content block {index} (tool_use) has no {key}")
            if key in block:
                block[key] = self.size.add(value or "")  # null: none yet
        if kind == "tool_use" and not isinstance(block.get("input"), dict | str | None):
            where = f"the input of content block {index} (tool_use)"
            raise wrong(PROVIDER, where, block["input"], "an object")
        given = block.get("input")
        if given:  # arguments given whole at the start: counted like streamed ones
            self.size.add(given if isinstance(given, str) else json.dumps(given, default=str))
        self.blocks[index] = block
        if kind == "tool_use":
            self.call_index[index] = len(self.call_index)
            self.partial_json[index] = []
            return [ToolCallDelta(index=self.call_index[index], id=block["id"], name=block["name"])]
        if kind == "text" and block.get("text"):
            return [TextDelta(text=block["text"])]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        key = _DELTA_FIELDS.get(kind) if isinstance(kind, str) else None
        if key is None:
            return []  # citations and deltas of newer block types stay in the raw payload only
        piece = delta.get(key)
        if piece is not None and not isinstance(piece, str):
            raise wrong(PROVIDER, f"the {key} of a {kind} (block {index})", piece, "a string")
        if not piece:
            return []
        if kind == "text_delta":
            self._piece(index, "text", piece)
            return [TextDelta(text=piece)]
        if kind == "thinking_delta":
            self._piece(index, "thinking", piece)
            return [ThinkingDelta(text=piece)]
        if kind == "signature_delta":
            self._piece(index, "signature", piece)
            return []
        if index not in self.call_index:
            what = f"content block {index} ({self.blocks[index]['type']})"
            raise malformed(PROVIDER, f"an input_json_delta came for {what}, not a tool_use")
        self.partial_json[index].append(self.size.add(piece))
        return [ToolCallDelta(index=self.call_index[index], arguments_delta=piece)]

    def _piece(self, index: int, key: str, piece: str) -> None:
        self.pieces.setdefault((index, key), []).append(self.size.add(piece))

    def response(self, requested_model: str) -> ModelResponse:
        if not self.stopped:
            raise ModelError("anthropic's stream ended before message_stop", transient=True)
        for (index, key), pieces in self.pieces.items():
            block = self.blocks[index]
            block[key] = block.get(key, "") + "".join(pieces)
        stop = self.message.get("stop_reason")
        truncated = stop in _LENGTH_STOPS
        has_calls = bool(self.call_index)
        content: list[Block] = []
        raw_blocks: list[dict[str, Any]] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            raw_blocks.append(block)
            if block["type"] == "text" and block.get("text"):
                phase: Literal["commentary", "final"] = "commentary" if has_calls else "final"
                content.append(TextBlock(text=block["text"], phase=phase))
            elif block["type"] == "thinking":
                signature = block.get("signature") or None
                content.append(ThinkingBlock(text=block.get("thinking", ""), signature=signature))
            elif block["type"] == "redacted_thinking":
                signature = REDACTED_THINKING_PREFIX + block.get("data", "")
                content.append(ThinkingBlock(text="", signature=signature))
            elif block["type"] == "tool_use":
                given = block.get("input") or {}
                raw = "".join(self.partial_json[index]) or (
                    given if isinstance(given, str) else json.dumps(given)
                )
                arguments = parse_arguments(raw)
                block["input"] = arguments if arguments is not None else raw
                content.append(
                    ToolCall(
                        id=block["id"],
                        name=block["name"],
                        raw=raw,
                        arguments=arguments,
                        truncated=truncated,
                    )
                )
        usage = self.message.get("usage") or {}
        read = token_figure(usage.get("cache_read_input_tokens"))
        written = token_figure(usage.get("cache_creation_input_tokens"))
        model = self.message.get("model")
        model = model if isinstance(model, str) and model else requested_model
        return ModelResponse(
            content=tuple(content),
            finish_reason="length" if truncated else "tool_calls" if has_calls else "stop",
            # input counts every prompt token (as OpenAI's does); cached = read from cache
            usage=Usage(
                input_tokens=token_figure(usage.get("input_tokens")) + read + written,
                output_tokens=token_figure(usage.get("output_tokens")),
                cached_tokens=read,
            ),
            model=f"{PROVIDER}:{model}",
            raw={**self.message, "content": raw_blocks},
        )


# the string fields of each known block type (a tool_use's must be there), and of each delta
_TEXT_FIELDS = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name"),
}
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
}


def _index_of(event: dict[str, Any]) -> int:
    index = event.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise wrong(PROVIDER, f"{event['type']}'s index", index, "a number")
    return index


def _import_sdk() -> Any:
    try:
        return importlib.import_module("anthropic")
    except ImportError as exc:
        raise UserError(
            "the anthropic provider needs the anthropic SDK: pip install anthropic"
        ) from exc


def _next_deadline(timeout_s: float | None) -> float | None:
    """The loop time by which the next event of the answer must come (None: no limit)."""
    return None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
