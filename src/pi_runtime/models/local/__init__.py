"""`LocalModel`: the embedded offline model, so `pi run` works with no key and no network.

The default is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, shipped in slices by PyPI
packages, `files`), run in-process by llama-cpp-python; Gemma 3 270M, a base model, is
the other embedded choice (`local:gemma-3-270m`), and `local:PATH` runs any GGUF file.

A file with a chat template is prompted in it and its replies are constrained to its own
tagged tool-call format (`chat`); a file without one is prompted as a plain transcript
of JSON replies (`prompt`). Either way decoding runs under a grammar built from the tool
schemas, so every reply is a schema-valid tool call or an answer, and the tool choice is
enforced rather than requested. Expect small models to pick tools and fill arguments
plausibly, not to reason well; point Pi at a real provider for that.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...exceptions import ModelError, UserError
from ...messages import Message, ToolCall, Usage
from .._repair import repairs_text
from ..base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    ToolCallDelta,
    ToolDefinition,
    complete_from_stream,
)
from .chat import answer_messages, render_chat
from .chat_reply import ChatReplyParser, answered_calls, call_key
from .files import DEFAULT_EMBEDDED, EMBEDDED
from .prompt import render_prompt
from .reply import ReplyParser
from .saved import saved_prompts_root

if TYPE_CHECKING:  # the engine imports numpy and llama_cpp: only when a reply is due
    from .engine import Decoded, Engine

__all__ = ["LocalModel"]

INSTALL_HINT = "pip install 'pi-runtime[local]'"
DEFAULT_MAX_TOKENS = 256
DEFAULT_CONTEXT = 8192

_END = object()


class LocalModel:
    """An embedded model (or another GGUF file at `path`), loaded once per process.

    Args:
        path: a GGUF file, or the name of an embedded model (`qwen2.5-coder-0.5b`,
            `gemma-3-270m`); None uses the default embedded model, assembled into the
            cache directory on first use (`$PI_CACHE_DIR`, `$XDG_CACHE_HOME/pi` or
            `~/.cache/pi`).
        n_ctx: context window in tokens.
        n_threads: CPU threads for decoding; None lets llama.cpp choose. On a busy
            two-core machine one thread can be faster than two.
        max_tokens: reply limit when the request's settings give none.
        temperature: sampling temperature when the request's settings give none; 0 is
            greedy, so the same conversation gets the same reply.
        seed: seed of the sampler when the temperature is above 0.
        saved_prompts: where prompts' KV caches are saved, so that a later process does
            not read the same prompt again (the agent's system prompt and tools, in
            every `pi run`): True for `$PI_SAVED_PROMPTS` (`off` for nowhere), else
            `prompts` in the cache directory; a directory; or False to save none.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_ctx: int = DEFAULT_CONTEXT,
        n_threads: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int = 0,
        saved_prompts: Path | bool = True,
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise UserError(f"the local model needs llama-cpp-python: {INSTALL_HINT}")
        if n_ctx < 512:
            raise UserError(f"the local model's context must be at least 512 tokens, got {n_ctx}")
        if n_threads is not None and n_threads < 1:
            raise UserError(f"the local model's threads must be at least 1, got {n_threads}")
        self.embedded: str | None = None
        if path is None or str(path) in EMBEDDED:
            self.embedded = DEFAULT_EMBEDDED if path is None else str(path)
            if not EMBEDDED[self.embedded].installed():
                packages = ", ".join(EMBEDDED[self.embedded].packages)
                raise UserError(f"the local model needs the packages {packages}: {INSTALL_HINT}")
            self.path: Path | None = None
            self.name = "local" if path is None else f"local:{self.embedded}"
        else:
            self.path = Path(path).expanduser()
            if not self.path.is_file():
                raise UserError(f"local model file {self.path} does not exist")
            self.name = f"local:{self.path}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.saved_prompts = saved_prompts_root(saved_prompts)
        """The directory of prompts saved across processes, or None."""

    @property
    def context_window(self) -> int | None:
        """The engine's window, `n_ctx`: the builder budgets each request for it."""
        return self.n_ctx

    def _engine(self) -> Engine:
        from .engine import engine_for
        from .files import embedded_model_path

        path = self.path if self.path is not None else embedded_model_path(self.embedded or "")
        return engine_for(path, n_ctx=self.n_ctx, n_threads=self.n_threads)

    @repairs_text
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            engine = await asyncio.to_thread(self._engine)
        except UserError as exc:  # found missing only now, mid-run: a model failure
            raise ModelError(str(exc)) from exc
        if engine.chat_template is None:
            events = self._transcript_reply(engine, request)
        else:
            events = self._chat_reply(engine, request)
        async for event in events:
            yield event

    async def _transcript_reply(
        self, engine: Engine, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        """A reply of a model without a chat template: one JSON object (`prompt`)."""
        from .engine import reply_grammar

        prompt = render_prompt(request.system, request.messages, request.tools)
        grammar = reply_grammar(request.tools, request.tool_choice)
        parser = ReplyParser(call_id=_call_id(request), tool_names=_names(request))
        done: list[Decoded] = []
        async for event in self._decode(engine, prompt, grammar, parser, request, done):
            yield event
        usage = _usage(done)
        yield ResponseDone(
            response=parser.response(cut=done[0].cut, usage=usage, model=engine.label)
        )

    async def _chat_reply(
        self, engine: Engine, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        """A reply in the model's chat format; calls that restate ones already answered
        since the user spoke are dropped, and of the rest only the first is kept. When
        none is left, the model answers instead."""
        from .engine import chat_reply_grammar

        prompt = self._chat_prompt(engine, request.system, request.messages, request.tools)
        output = request.output.schema if request.output is not None else None
        grammar = chat_reply_grammar(request.tools, request.tool_choice, output=output)
        parser = self._chat_parser(request)
        done: list[Decoded] = []
        async for event in self._decode(engine, prompt, grammar, parser, request, done):
            yield event
        calls = parser.calls(cut=done[0].cut)
        answered = answered_calls(request.messages)
        # One new call at a time: what a small model writes after it is a guess made
        # before the first result came back (a reminder before the weather is known).
        keep = [c for c in calls if c.truncated or call_key(c) not in answered][:1]
        if calls and not keep and request.tool_choice == "auto":
            parser = self._chat_parser(request)
            grammar = chat_reply_grammar(request.tools, "none", one_paragraph=True, output=output)
            flat = answer_messages(request.messages)
            role = request.system.strip().split("\n\n", 1)[0]  # the rules are for calling
            prompt = self._chat_prompt(engine, role, flat, ())
            async for event in self._decode(engine, prompt, grammar, parser, request, done):
                yield event
        elif not keep:
            keep = calls  # a call is required: the runtime's breakers judge the repeat
        response = parser.response(
            cut=done[-1].cut, usage=_usage(done), model=engine.label, calls=keep
        )
        for index, call in enumerate(b for b in response.content if isinstance(b, ToolCall)):
            yield ToolCallDelta(index=index, id=call.id, name=call.name)
            yield ToolCallDelta(index=index, arguments_delta=call.raw)
        yield ResponseDone(response=response)

    def _chat_parser(self, request: ModelRequest) -> ChatReplyParser:
        return ChatReplyParser(
            call_id=_call_id(request),
            tool_names=_names(request),
            json_answer=request.output is not None,
        )

    def _chat_prompt(
        self,
        engine: Engine,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
    ) -> str:
        assert engine.chat_template is not None
        return render_chat(
            engine.chat_template,
            system,
            messages,
            tools,
            specials=engine.specials,
            bos_token=engine.bos_text,
            eos_token=engine.eos_text,
        )

    async def _decode(
        self,
        engine: Engine,
        prompt: str,
        grammar: str,
        parser: ReplyParser | ChatReplyParser,
        request: ModelRequest,
        done: list[Decoded],
    ) -> AsyncIterator[StreamEvent]:
        """Decode one reply in a thread, passing on the parser's deltas; appends the
        token counts to `done`."""
        settings = request.settings
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def on_text(text: str) -> None:  # called from the decoding thread
            loop.call_soon_threadsafe(pieces.put_nowait, text)

        decoding = asyncio.ensure_future(
            asyncio.to_thread(
                engine.decode,
                prompt,
                grammar,
                max_tokens=settings.max_tokens or self.max_tokens,
                temperature=(
                    self.temperature if settings.temperature is None else settings.temperature
                ),
                seed=self.seed,
                on_text=on_text,
                stop=stop,
                chat=engine.chat_template is not None,
                saved=self.saved_prompts,
            )
        )
        # Runs after every piece the thread queued: both go through call_soon_threadsafe.
        decoding.add_done_callback(lambda _: pieces.put_nowait(_END))
        try:
            while (piece := await pieces.get()) is not _END:
                assert isinstance(piece, str)
                for event in parser.feed(piece):
                    yield event
            done.append(await decoding)
        except ModelError:
            raise
        except Exception as exc:  # llama.cpp failing mid-reply is a model failure
            raise ModelError(f"the local model failed: {type(exc).__name__}: {exc}") from exc
        finally:
            stop.set()  # an abandoned reply stops decoding at its next token
        for event in parser.flush(cut=done[-1].cut):
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self, request)

    async def aclose(self) -> None:
        return None  # the loaded model is shared by the process and outlives this adapter


def _call_id(request: ModelRequest) -> str:
    return f"call_{request.step}_0"


def _names(request: ModelRequest) -> tuple[str, ...]:
    return tuple(t.name for t in request.tools)


def _usage(done: list[Decoded]) -> Usage:
    """The token counts of the reply's decodes (a second one re-reads a cached prompt)."""
    return Usage(
        input_tokens=sum(d.prompt_tokens for d in done),
        output_tokens=sum(d.output_tokens for d in done),
        cached_tokens=sum(d.cached_tokens for d in done),
    )
