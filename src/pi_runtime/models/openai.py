"""`OpenAIModel`: any OpenAI-compatible Chat Completions API, streamed, on the official SDK.

One adapter serves OpenAI, DeepSeek, Ollama, OpenRouter and any `--base-url` server; what
differs between them is a `Vendor` entry (`providers.py`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exceptions import ModelError, UserError
from ..messages import (
    Block,
    FinishReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    keep_secret,
    redact,
)
from ._client import LoopBoundClient
from ._deltas import AnswerSize, parse_arguments
from ._openai_request import chat_params
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
from .classify import classify_provider_error
from .providers import VENDORS, Vendor, resolve_api_key
from .windows import known_window

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionChunk

__all__ = ["OpenAIModel", "StreamAccumulator", "reached_output_limit"]

INSTALL_HINT = "pip install 'pi-runtime[openai]'"


class OpenAIModel:
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    Args:
        model: the model name the server knows (`gpt-4o-mini`, `deepseek-chat`, …).
        vendor: where and how to reach it (see `providers.VENDORS`, `custom_server`).
        client: an `AsyncOpenAI` to use instead of the adapter's own (custom transports,
            proxies); the caller keeps it on one event loop.
        timeout_s: how long the server may go without sending any of the answer (from
            the request to its first chunk, and between chunks; keep-alives do not count).
            A long answer that keeps coming is never cut; the run's wall clock bounds it.
    """

    def __init__(
        self,
        model: str,
        *,
        vendor: Vendor,
        client: AsyncOpenAI | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if not model:
            raise UserError(f"the {vendor.display} provider needs a model name")
        self.model = model
        self.vendor = vendor
        known = VENDORS.get(vendor.name)
        on_home = known is not None and known.base_url == vendor.base_url
        # the name goes into traces and results: a base URL's credentials stay out of it
        self.name = (
            f"{vendor.name}:{model}"
            if on_home
            else redact(f"{vendor.name}:{model}@{vendor.base_url}")
        )
        self._given = client
        if client is not None:  # its key, wherever it came from, is redacted from now on
            keep_secret(getattr(client, "api_key", None))
        self._timeout_s = timeout_s
        # the adapter's own client lives as long as the model, re-made on a new event loop
        self._own: LoopBoundClient[AsyncOpenAI] = LoopBoundClient(self._new_client)
        if client is None:
            self._api_key = resolve_api_key(vendor)
            try:
                import openai
            except ImportError:
                raise UserError(
                    f"the {vendor.display} provider needs the openai package: {INSTALL_HINT}"
                ) from None
            self._sdk = openai

    def _new_client(self) -> AsyncOpenAI:
        # Retries are the runtime's job (with events and backoff), not the SDK's.
        client: AsyncOpenAI = self._sdk.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.vendor.base_url,
            max_retries=0,
            timeout=self._timeout_s,
        )
        return client

    @repairs_text
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        client = self._given or await self._own.get()
        async for event in self._stream(client, request):
            yield event

    async def _stream(
        self, client: AsyncOpenAI, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        params = chat_params(request, model=self.model, vendor=self.vendor)
        accumulator = StreamAccumulator(turn=request.step, vendor=self.vendor.name)
        # the SDK's timeout bounds each read, and a keep-alive comment is one: a server
        # dripping them never ended. Each chunk must come within timeout_s of the last.
        timeout_s = self._timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                chunks = await client.chat.completions.create(**params)
        except Exception as exc:  # everything the SDK raises is a failed provider call
            raise classify_provider_error(exc, provider=self.vendor.display) from exc
        try:
            iterator = aiter(chunks)
            while True:
                try:
                    async with asyncio.timeout(timeout_s):  # between yields, not across
                        chunk = await anext(iterator)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise classify_provider_error(exc, provider=self.vendor.display) from exc
                for event in accumulator.add(chunk):
                    yield event
        finally:
            await chunks.close()
        yield ResponseDone(
            response=accumulator.response(
                max_tokens=request.settings.max_tokens, provider=self.vendor.display
            )
        )

    @property
    def context_window(self) -> int | None:
        """The model's published context window (`models.windows`), None when unknown."""
        return known_window(self.model) if self.vendor.known_windows else None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self, request)

    async def aclose(self) -> None:
        """Close the adapter's client (and a client passed in); a later call opens anew."""
        await self._own.aclose()
        if self._given is not None:
            await self._given.close()


@dataclass(slots=True)
class _PartialCall:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)


_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


class StreamAccumulator:
    """Folds Chat Completions chunks into deltas as they come and one response at the end."""

    def __init__(self, *, turn: int, vendor: str = "openai") -> None:
        self.turn = turn
        self.vendor = vendor
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.delta_chunks = 0
        self.size = AnswerSize(vendor)

    def add(self, chunk: ChatCompletionChunk) -> list[StreamEvent]:
        """The deltas one chunk carries (the usage-only last chunk carries none)."""
        for key in ("id", "model", "created", "system_fingerprint"):
            value = getattr(chunk, key, None)
            if value is not None:
                self.meta.setdefault(key, value)
        if chunk.usage is not None:
            self.usage = chunk.usage.model_dump(mode="json", exclude_none=True)
        events: list[StreamEvent] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue  # Pi never asks for n > 1
            before = len(events)
            delta = choice.delta
            # DeepSeek and vLLM call it reasoning_content, OpenRouter reasoning.
            reasoning = getattr(delta, "reasoning_content", None) or getattr(
                delta, "reasoning", None
            )
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(self.size.add(reasoning))
                events.append(ThinkingDelta(text=reasoning))
            if delta.content:
                self.text.append(self.size.add(delta.content))
                events.append(TextDelta(text=delta.content))
            for piece in delta.tool_calls or ():
                index = getattr(piece, "index", None)
                if not isinstance(index, int):  # some servers send whole calls, unnumbered
                    last = max(self.calls, default=-1)
                    index = last + 1 if piece.id or last < 0 else last
                events.extend(self._tool_piece(index, piece.id, piece.function))
            if len(events) > before:
                self.delta_chunks += 1
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason
        return events

    def _tool_piece(self, index: int, call_id: str | None, function: Any) -> list[StreamEvent]:
        name = getattr(function, "name", None) or ""
        arguments = getattr(function, "arguments", None) or ""
        events: list[StreamEvent] = []
        call = self.calls.get(index)
        if call is None:
            # Some servers send no id; the conversation still needs one to pair results.
            call = self.calls[index] = _PartialCall(id=call_id or f"call_{self.turn}_{index}")
            call.name = name
            events.append(ToolCallDelta(index=index, id=call.id, name=name))
        elif name and name != call.name:
            call.name += name
        if arguments:
            call.arguments.append(self.size.add(arguments))
            events.append(ToolCallDelta(index=index, arguments_delta=arguments))
        return events

    def response(self, *, max_tokens: int | None, provider: str) -> ModelResponse:
        """The whole answer in neutral form, with the truncation rule applied."""
        if self.finish is None:
            raise ModelError(
                f"{provider} ended the stream before the answer was finished", transient=True
            )
        calls = [
            ToolCall(
                id=c.id,
                name=c.name,
                raw="".join(c.arguments),
                arguments=parse_arguments("".join(c.arguments)),
            )
            for _, c in sorted(self.calls.items())
        ]
        usage = _usage(self.usage, self.delta_chunks)
        cut = reached_output_limit(self.finish, calls, usage, max_tokens)
        finish: FinishReason = "length" if cut else _FINISH.get(self.finish, "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        content: list[Block] = []
        if self.reasoning:
            content.append(ThinkingBlock(text="".join(self.reasoning)))
        if self.text:
            content.append(
                TextBlock(text="".join(self.text), phase="commentary" if calls else "final")
            )
        content.extend(
            ToolCall(id=c.id, name=c.name, raw=c.raw, arguments=c.arguments, truncated=cut)
            for c in calls
        )
        return ModelResponse(
            content=tuple(content),
            finish_reason=finish,
            usage=usage,
            # The vendor prefix tells a later request who wrote this message (history.py).
            model=f"{self.vendor}:{self.meta.get('model') or 'unknown'}",
            raw=self._raw(calls),
        )

    def _raw(self, calls: list[ToolCall]) -> dict[str, Any]:
        """The streamed answer folded back into the shape of a non-streamed completion."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
                for c in calls
            ]
        raw: dict[str, Any] = {
            **self.meta,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.usage is not None:
            raw["usage"] = self.usage
        jsonable: dict[str, Any] = json.loads(json.dumps(raw, default=str))
        return jsonable


def reached_output_limit(
    finish: str | None, calls: list[ToolCall], usage: Usage, max_tokens: int | None
) -> bool:
    """Whether the answer was cut off by the output limit, whatever the server says.

    `length` says so. So does an answer that used all of `max_tokens` while a call's
    arguments don't parse: llama-cpp-python's server reports `tool_calls` for a call cut
    off mid-string at `max_tokens=5`.
    """
    if finish == "length":
        return True
    used_all = max_tokens is not None and usage.output_tokens >= max_tokens
    return used_all and any(c.arguments is None for c in calls)


def _usage(usage: dict[str, Any] | None, delta_chunks: int) -> Usage:
    """The usage the server reported, else what the stream shows of it.

    Some servers send no usage when streaming (llama-cpp-python's ignores
    `stream_options`). Every chunk carrying text or arguments holds at least one token, so
    the count of such chunks is a lower bound of the output — enough to tell that an
    answer used all of `max_tokens`. The input stays unknown (0); `raw` has no `usage`.
    """
    if not usage:
        return Usage(output_tokens=delta_chunks)
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
    )
