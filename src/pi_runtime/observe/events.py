"""Run events: one per state transition and per thing that happened in it.

Event kinds are a public wire format (traces, streams): never rename one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal, TypeAlias

from ..messages import AssistantMessage, Message, Usage, message_to_dict

LoopPhase: TypeAlias = Literal["observe", "think", "act", "reflect", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    run_id: str
    session_id: str
    model: str
    system: str
    tools: tuple[str, ...]
    limits: dict[str, Any]
    prompt: dict[str, Any] = field(default_factory=dict)
    """The template the system prompt was rendered from: name, version, sha256."""
    runtime: str = ""
    """The runtime block placed in front of the current user message."""
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """The loop moved from one phase to the next."""

    source: LoopPhase
    target: LoopPhase
    step: int
    kind: Literal["transition"] = "transition"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAppended:
    """A message joined the conversation; `index` is its position in it."""

    index: int
    message: Message
    kind: Literal["message"] = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested:
    """A model call: the conversation's first `message_count` messages plus these settings."""

    turn: int
    step: int
    message_count: int
    tool_choice: str
    tools: tuple[str, ...]
    input_tokens: int = 0
    """Tokens of the request as sent, counted by Pi (o200k_base)."""
    context: dict[str, Any] = field(default_factory=dict)
    """How the context was built: tokens per layer, compression steps, dropped/cut messages."""
    summary: str | None = None
    """The note that stood for dropped turns, when there was one."""
    prompt: dict[str, Any] = field(default_factory=dict)
    """The template the system prompt came from: name, version, sha256."""
    kind: Literal["model_request"] = "model_request"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded:
    turn: int
    step: int
    message: AssistantMessage
    raw: Any
    latency_ms: float
    first_tool_call_at_ms: float | None = None
    """When the first tool call of this response began streaming, in ms since run start."""
    usage_source: Literal["provider", "counted"] = "provider"
    kind: Literal["model_response"] = "model_response"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFailed:
    turn: int
    step: int
    message: str
    transient: bool
    attempt: int
    retry_in_ms: float | None = None
    kind: Literal["model_error"] = "model_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRetried:
    tool_call_id: str
    name: str
    attempt: int
    error_kind: str
    retry_in_ms: float
    kind: Literal["tool_retry"] = "tool_retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    """One tool call's outcome (`executed` is False when the gate refused it)."""

    tool_call_id: str
    name: str
    executed: bool
    is_error: bool
    error_kind: str | None = None
    error_class: str | None = None
    attempts: int = 0
    duration_ms: float = 0.0
    idempotency_key: str | None = None
    result_bytes: int = 0
    result_truncated: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStarted:
    """A background tool's call became a job; its result arrives in a later run."""

    tool_call_id: str
    name: str
    job_id: str
    kind: Literal["job_started"] = "job_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractChecked:
    """A final answer was checked against the output contract."""

    contract: str
    attempt: int
    ok: bool
    errors: tuple[str, ...] = ()
    kind: Literal["contract_check"] = "contract_check"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsSelected:
    """Tool retrieval chose which tools this model call offers."""

    turn: int
    method: str
    selected: tuple[str, ...]
    scores: dict[str, float] = field(default_factory=dict)
    fallback_reason: str | None = None
    kind: Literal["tool_selection"] = "tool_selection"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardTriggered:
    guard: str
    detail: str
    kind: Literal["guard"] = "guard"


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityAudit:
    tool_call_id: str
    name: str
    detail: str
    kind: Literal["security_audit"] = "security_audit"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDelta:
    """Streamed output as it arrives (live streams only; traces keep the whole response)."""

    turn: int
    delta: str
    channel: Literal["text", "thinking", "tool_call"] = "text"
    kind: Literal["model_delta"] = "model_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    status: str
    stop_reason: str
    steps: int
    output: Any
    usage: Usage
    metrics: dict[str, Any]
    error: str | None = None
    wall_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    kind: Literal["run_finished"] = "run_finished"


Event: TypeAlias = (
    RunStarted
    | Transition
    | MessageAppended
    | ModelRequested
    | ModelResponded
    | ModelFailed
    | ToolRetried
    | ToolFinished
    | GuardTriggered
    | ContractChecked
    | ToolsSelected
    | JobStarted
    | SecurityAudit
    | ModelDelta
    | RunFinished
)


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if getattr(value, "role", None) in ("user", "assistant", "tool") and is_dataclass(value):
        return message_to_dict(value)  # type: ignore[arg-type]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event as JSON-ready data, `kind` first."""
    data = {"kind": event.kind}
    data.update(
        {f.name: _jsonable(getattr(event, f.name)) for f in fields(event) if f.name != "kind"}
    )
    return data
