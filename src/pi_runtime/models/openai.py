"""`OpenAIModel`: any OpenAI-compatible Chat Completions API, streamed, on the official SDK.

One adapter serves OpenAI, DeepSeek, Ollama, OpenRouter and any `--base-url` server; what
differs between them is a `Vendor` entry (`providers.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..exceptions import UserError
from ..messages import keep_secret, redact
from ._client import LoopBoundClient
from ._openai_request import chat_params
from ._openai_stream import StreamAccumulator, reached_output_limit
from ._repair import repairs_text
from .base import ModelRequest, ModelResponse, ResponseDone, StreamEvent, complete_from_stream
from .classify import classify_provider_error
from .providers import VENDORS, Vendor, resolve_api_key
from .windows import known_window

if TYPE_CHECKING:
    from openai import AsyncOpenAI

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
        accumulator = StreamAccumulator(
            turn=request.step, vendor=self.vendor.name, provider=self.vendor.display
        )
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
        yield ResponseDone(response=accumulator.response(max_tokens=request.settings.max_tokens))

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
