"""The model seam: what a request carries, what a response is, and the `Model` protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..exceptions import UserError
from ..messages import (
    AssistantMessage,
    Block,
    FinishReason,
    Message,
    ToolCall,
    Usage,
    quick_init,
)

ToolChoice: TypeAlias = str
"""`auto`, `required`, `none`, or the name of one tool the next call must use."""

TOOL_CHOICE_MODES = ("auto", "required", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool as the model sees it: name, description, strict JSON Schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """A final answer must be a JSON object matching `schema` (native structured output).

    `strict` says the provider may enforce the schema while decoding; adapters without
    structured output ignore this and rely on the instructions in the system prompt.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    max_tokens: int | None = None
    temperature: float | None = None


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call needs. `messages` is the whole conversation so far."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = "auto"
    settings: ModelSettings = field(default_factory=ModelSettings)
    turn: int | None = None
    """Number of assistant messages already in `messages`, when the caller knows it."""
    output: OutputFormat | None = None
    """The output contract of a final answer, for providers with structured output."""

    @property
    def step(self) -> int:
        """Number of assistant messages already in the conversation."""
        if self.turn is not None:
            return self.turn
        return sum(1 for m in self.messages if m.role == "assistant")


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One complete model answer in neutral form, plus the provider's raw payload."""

    content: tuple[Block, ...]
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    raw: Any = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        # a list, not a generator: asked of every answer, and half the cost
        return tuple([b for b in self.content if isinstance(b, ToolCall)])

    def to_message(self) -> AssistantMessage:
        return AssistantMessage(
            content=self.content,
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta:
    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of a tool call: the first delta of a call carries its id and name."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDone:
    response: ModelResponse
    kind: Literal["response_done"] = "response_done"


StreamEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | ResponseDone


@runtime_checkable
class Model(Protocol):
    """A model adapter. `stream` must end with exactly one `ResponseDone`.

    A model may also have a `context_window` attribute (or property): the input tokens
    it accepts, or None when unknown. It is optional, so a model without one still is a
    `Model`; read it with `context_window_of`. The context builder budgets for it unless
    `Budget.context_window` is set.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...


def context_window_of(model: object) -> int | None:
    """The context window `model` reports (its optional `context_window`), or None.

    Raises:
        UserError: the model reports something other than a positive integer or None.
    """
    try:
        window = getattr(model, "context_window", None)
    except Exception as exc:  # a user's property that fails: misuse, said before a run
        raise UserError(
            f"model {getattr(model, 'name', model)!r}: reading context_window failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise UserError(
            f"model {getattr(model, 'name', model)!r} reports context_window={window!r}; "
            "expected a positive integer or None"
        )
    return window


async def complete_from_stream(model: Model, request: ModelRequest) -> ModelResponse:
    """`complete` for adapters whose natural form is the stream."""
    async for event in model.stream(request):
        if isinstance(event, ResponseDone):
            return event.response
    raise RuntimeError(f"model {model.name!r} ended its stream without a response")
