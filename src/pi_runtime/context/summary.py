"""Summaries of dropped turns: the summariser seam, the model's one, and what a call gave.

A summariser is asked once per dropped prefix, only when the digest of the dropped turns
does not fit. What it writes is a proposal: the builder sends it only when it is not
empty and fits in the room left; otherwise — or when the call fails — the digest trimmed
to the room goes instead, and the build records why (`summary_fallback`). A failed
summary never ends the run: it only costs the older digest lines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from ..messages import TextBlock, Usage, UserMessage, token_figure
from ..models import Model, ModelRequest, ModelSettings
from ..models.pricing import cost_usd
from .templates import load_template
from .tokens import count_tokens

Summariser = Callable[[str], Awaitable[str]]
"""Condenses the digest of dropped turns; an empty text means it wrote nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """What one summariser call gave."""

    text: str = ""
    usage: Usage | None = None
    """What the call reported spending (None: a summariser that does not say)."""
    failure: str | None = None
    """Why there is no text, when the call failed."""


class ModelSummariser:
    """A summariser that asks a model (one call, only when the digest does not fit),
    under the `summariser@1` template; `prompt` is that template's name, version and
    sha256, which the build report records beside the summary it wrote."""

    def __init__(self, model: Model, *, max_tokens: int = 400) -> None:
        template = load_template("summariser")
        self.model = model
        self.max_tokens = max_tokens
        self.system = template.render({})
        self.prompt = template.ref

    async def summarise(self, text: str) -> Summary:
        """The summary of `text` ("" when the model wrote none) and the call's usage."""
        request = ModelRequest(
            system=self.system,
            messages=(UserMessage(content=text),),
            tool_choice="none",
            settings=ModelSettings(max_tokens=self.max_tokens),
        )
        response = await self.model.complete(request)
        written = "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
        return Summary(text=written, usage=self._spent(response.usage, text, written))

    def _spent(self, reported: Usage, text: str, written: str) -> Usage:
        """What the call spent, as a run bills a call: a figure that is no count of tokens
        (or none) is Pi's own count, priced for the summariser's model."""
        input_tokens = token_figure(reported.input_tokens)
        if input_tokens == 0:
            input_tokens = count_tokens(self.system) + count_tokens(text)
        output_tokens = token_figure(reported.output_tokens) or count_tokens(written)
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                      cached_tokens=token_figure(reported.cached_tokens))  # fmt: skip
        return replace(usage, cost_usd=cost_usd(self.model.name, usage))

    async def __call__(self, text: str) -> str:
        return (await self.summarise(text)).text


def model_summariser(model: Model, *, max_tokens: int = 400) -> Summariser:
    """A summariser that asks `model` (one call, only when the digest does not fit)."""
    return ModelSummariser(model, max_tokens=max_tokens)


async def summarise(summariser: Summariser, text: str) -> Summary:
    """Ask `summariser` about `text`; a failure is a `Summary` saying why, not an error:
    the digest, trimmed, stands in for the summary."""
    try:
        if isinstance(summariser, ModelSummariser):
            return await summariser.summarise(text)
        written: object = await summariser(text)
    except Exception as exc:  # any failure of a summariser falls back to the digest
        return Summary(failure=f"the summariser failed: {type(exc).__name__}: {exc}")
    if not isinstance(written, str):
        return Summary(failure=f"the summariser returned {type(written).__name__}, not text")
    return Summary(text=written)
