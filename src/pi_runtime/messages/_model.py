"""The neutral message model every provider is mapped to and from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypeGuard

from pydantic import Field

from ._records import quick_init

Phase: TypeAlias = Literal["commentary", "final"]
FinishReason: TypeAlias = Literal["stop", "tool_calls", "length"]
StopReason: TypeAlias = Literal[
    "final_answer",
    "max_steps",
    "token_budget",
    "wall_clock",
    "consecutive_errors",
    "loop_detected",
    "no_progress",
    "model_error",
    "tool_error",
    "security",
    "contract_violation",
    "cancelled",
    "awaiting_tool",
    "awaiting_approval",
    "internal_error",
]
RunStatus: TypeAlias = Literal["completed", "stopped", "failed", "awaiting"]
UserOrigin: TypeAlias = Literal["user", "contract_repair", "tool_limit", "plan", "route"]
"""Who wrote a user turn: the user, or the runtime (a contract repair request, the notice
that the request's tool calls are used up, the brief of a plan-mode phase, the go-ahead
after a router's choice). Only the user's own turns start a request."""

STOP_STATUS: dict[StopReason, RunStatus] = {
    "final_answer": "completed",
    "max_steps": "stopped",
    "token_budget": "stopped",
    "wall_clock": "stopped",
    "consecutive_errors": "stopped",
    "loop_detected": "stopped",
    "no_progress": "stopped",
    "cancelled": "stopped",
    "model_error": "failed",
    "tool_error": "failed",
    "security": "failed",
    "contract_violation": "failed",
    "internal_error": "failed",
    "awaiting_tool": "awaiting",
    "awaiting_approval": "awaiting",
}


def _is_unknown(value: object) -> bool:
    return value is None


MOST_TOKENS = 10**12
"""The largest usage figure taken as a count of tokens."""


def token_figure(value: object) -> int:
    """A usage figure as a provider reported it, if it is a count of tokens (an int from 0
    to `MOST_TOKENS`); else 0, unreported, so the run counts the tokens itself."""
    return value if type(value) is int and 0 <= value <= MOST_TOKENS else 0


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens one model call (or a whole run) consumed, and what they cost.

    `cost_usd` is None when the price is unknown (a scripted model, a server nobody
    lists prices for), never 0: 0.0 means known to be free (the embedded model). A sum
    is unknown as soon as one part is, so a run's total never understates its bill.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    # Written only when known, so a message's usage keeps the shape it had before
    # `cost_usd` existed (traces, stores); `RunResult.usage` always shows it.
    cost_usd: Annotated[float | None, Field(exclude_if=_is_unknown)] = None

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else self.cost_usd + other.cost_usd
        )
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    """Visible text. `commentary` accompanies tool calls; `final` answers the user."""

    text: str
    phase: Phase = "final"
    kind: Literal["text"] = "text"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """Reasoning the provider exposed; `signature` lets it be sent back verbatim."""

    text: str
    signature: str | None = None
    kind: Literal["thinking"] = "thinking"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call as the model wrote it.

    `raw` is the argument text exactly as produced; `arguments` is its parse when it is a
    JSON object, else None. `truncated` marks a call from a message cut off by the output
    limit: such a call is never executed.
    """

    id: str
    name: str
    raw: str
    arguments: dict[str, Any] | None = None
    truncated: bool = False
    kind: Literal["tool_call"] = "tool_call"


Block: TypeAlias = TextBlock | ThinkingBlock | ToolCall

_is_tool_call: Callable[[object], TypeGuard[ToolCall]] = ToolCall.__instancecheck__  # type: ignore[assignment]
"""`isinstance(block, ToolCall)` as a function of the block alone (a C call)."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolErrorInfo:
    """What the model reads when a tool call failed."""

    kind: str
    message: str
    hint: str = ""


def _is_user(origin: UserOrigin) -> bool:
    return origin == "user"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A user turn. `origin` tells the user's own words from turns the runtime adds."""

    content: str
    # Written only when not the default, so a plain turn keeps the shape it had before
    # `origin` existed, wherever it is serialized (messages, traces, stores).
    origin: Annotated[UserOrigin, Field(exclude_if=_is_user)] = "user"
    role: Literal["user"] = "user"

    @property
    def is_request(self) -> bool:
        """True for a turn the user wrote: the start of a request."""
        return self.origin == "user"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    content: tuple[Block, ...]
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    role: Literal["assistant"] = "assistant"

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        # filtered in C by isinstance's own check: no comprehension frame (asked of
        # every answer, several times a turn)
        return tuple(filter(_is_tool_call, self.content))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """The outcome of one tool call, under the id of the call it answers."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    error: ToolErrorInfo | None = None
    # Written only when a tool spent model calls (a sub-agent's run): counted with the
    # request's tokens when a continuation reads its spend back from the conversation.
    usage: Annotated[Usage | None, Field(exclude_if=_is_unknown)] = None
    role: Literal["tool"] = "tool"


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
