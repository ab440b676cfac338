"""Run events: one per state transition and per thing that happened in it.

Event kinds are a public wire format (traces, streams): never rename one. Each class is
named for its kind where no other public name stands in the way, and `kind` is its first
field so it leads every line written. `wire` writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field

from ..messages import AssistantMessage, Message, Usage, quick_init


def _is_none(value: object) -> bool:
    return value is None


LoopPhase: TypeAlias = Literal["observe", "think", "act", "reflect", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    kind: Literal["run_started"] = "run_started"
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
    parent_run_id: Annotated[str | None, Field(exclude_if=_is_none)] = None
    """The run whose tool call started this one (a sub-agent's run); written only then."""
    parent_call_id: Annotated[str | None, Field(exclude_if=_is_none)] = None
    """That run's tool call this run answers."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """The loop moved from one phase to the next."""

    kind: Literal["transition"] = "transition"
    source: LoopPhase
    target: LoopPhase
    step: int


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAppended:
    """A message joined the conversation; `index` is its position in it."""

    kind: Literal["message"] = "message"
    index: int
    message: Annotated[Message, Field(discriminator="role")]


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested:
    """A model call: the conversation's first `message_count` messages plus these settings."""

    kind: Literal["model_request"] = "model_request"
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


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded:
    kind: Literal["model_response"] = "model_response"
    turn: int
    step: int
    message: AssistantMessage
    raw: Any
    latency_ms: float
    first_tool_call_at_ms: float | None = None
    """When the first tool call of this response began streaming, in ms since run start."""
    usage_source: Literal["provider", "counted"] = "provider"
    first_token_at_ms: Annotated[float | None, Field(exclude_if=_is_none)] = None
    """When this response's first token (or, unstreamed, the response) arrived, in ms
    since run start; written only when known, so older lines keep their shape."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelErrorEvent:
    """One model call failed (`transient` ones are retried after `retry_in_ms`).

    Named for its kind, `model_error`; `ModelError` is the exception it records, and the
    stop reason of the same name is the run giving up.
    """

    kind: Literal["model_error"] = "model_error"
    turn: int
    step: int
    message: str
    transient: bool
    attempt: int
    retry_in_ms: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRetried:
    kind: Literal["tool_retry"] = "tool_retry"
    tool_call_id: str
    name: str
    attempt: int
    error_kind: str
    retry_in_ms: float


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """One tool call's outcome (`executed` is False when the gate refused it)."""

    kind: Literal["tool_result"] = "tool_result"
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


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStarted:
    """A background tool's call became a job; its result arrives in a later run."""

    kind: Literal["job_started"] = "job_started"
    tool_call_id: str
    name: str
    job_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """A call needing a person's approval passed the gate's checks and waits, not run."""

    kind: Literal["approval_requested"] = "approval_requested"
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    fingerprint: str
    """SHA-256 of the canonical arguments: the decision is bound to it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalGranted:
    """A person approved a waiting call; it ran with `arguments` (`edited`: not the
    model's, which `fingerprint` is of)."""

    kind: Literal["approval_granted"] = "approval_granted"
    tool_call_id: str
    name: str
    fingerprint: str
    arguments: dict[str, Any]
    edited: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRejected:
    """A person rejected a waiting call: it did not run, and the model reads `reason`."""

    kind: Literal["approval_rejected"] = "approval_rejected"
    tool_call_id: str
    name: str
    fingerprint: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildRun:
    """A run started inside one of this run's tool calls (a sub-agent) ended; its usage
    is counted in this run's. Its own trace names this run as `parent_run_id`."""

    kind: Literal["child_run"] = "child_run"
    tool_call_id: str
    name: str
    run_id: str | None
    trace: str | None
    status: str | None
    stop_reason: str | None
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractChecked:
    """A final answer was checked against the output contract."""

    kind: Literal["contract_check"] = "contract_check"
    contract: str
    attempt: int
    ok: bool
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsSelected:
    """Tool retrieval chose which tools this model call offers."""

    kind: Literal["tool_selection"] = "tool_selection"
    turn: int
    method: str
    selected: tuple[str, ...]
    scores: dict[str, float] = field(default_factory=dict)
    fallback_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardTriggered:
    kind: Literal["guard"] = "guard"
    guard: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityAudit:
    kind: Literal["security_audit"] = "security_audit"
    tool_call_id: str
    name: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailTripped:
    """A guardrail refused (`deny`), replaced (`rewrite`) or failed on (`error`) a value:
    the user's message (`input`), the final answer (`output`) or a call's arguments
    (`tool`). `reason` and `excerpt` (the start of a refused value) are bounded and
    redacted."""

    kind: Literal["guardrail_tripped"] = "guardrail_tripped"
    guardrail: str
    stage: Literal["input", "output", "tool"]
    verdict: Literal["deny", "rewrite", "error"]
    reason: str
    tool: str | None = None
    tool_call_id: str | None = None
    excerpt: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalated:
    """The `escalate` hook was told the run ended `stopped` or `failed`: its JSON `value`,
    or the `error` that kept it from one."""

    kind: Literal["escalated"] = "escalated"
    hook: str
    value: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecalled:
    """Long-term facts (memory L3) were recalled: into the prompt's memory layer at the
    run's start (`via` `prompt`), or by the `recall` tool (`tool`)."""

    kind: Literal["memory_recalled"] = "memory_recalled"
    scope: str
    via: Literal["prompt", "tool"]
    method: str
    """`embedding`, `bm25`, or `none` (nothing to rank)."""
    fact_ids: tuple[str, ...] = ()
    """The facts recalled, best first (for `prompt`: those that fit the layer's budget)."""
    scores: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    """Tokens of the memory layer's block (`prompt` only)."""
    left_out: tuple[str, ...] = ()
    """Facts ranked in the top-k that the layer's budget left out (`prompt` only)."""
    fallback_reason: str | None = None
    error: str | None = None
    """Why nothing could be recalled (the store failed); the run goes on without."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWritten:
    """Long-term facts were written: by the `remember` tool (`via` `tool`), or at the
    run's end (`end`: the facts its `remember` calls staged)."""

    kind: Literal["memory_written"] = "memory_written"
    scope: str
    via: Literal["tool", "end"]
    fact_ids: tuple[str, ...] = ()
    """The facts kept, new or already known."""
    known: tuple[str, ...] = ()
    """Those of `fact_ids` the scope already held (not written twice)."""
    discarded: int = 0
    """Staged facts not written because the run did not end well (`end` only)."""
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedStep:
    """One step of a plan: its goal, and the tools its executor is offered."""

    goal: str
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCreated:
    """A planner call made a plan (`revision` 0), or a replan (1, 2, …) replaced it.

    `fallback`: the planner's answer missed the plan contract after its repairs, so the
    plan is one step holding the whole request, with every tool.
    """

    kind: Literal["plan_created"] = "plan_created"
    steps: tuple[PlannedStep, ...]
    revision: int = 0
    fallback: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStepStarted:
    """An executor loop began step `number` (1 for the first) of `total` of a plan."""

    kind: Literal["plan_step_started"] = "plan_step_started"
    number: int
    total: int
    goal: str
    tools: tuple[str, ...] = ()
    revision: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStepFinished:
    """A plan step ended and the reflector judged it.

    `outcome`: `answered` (the executor reported) or `step_limit` (its model calls per
    step ran out). `done`, `replan` and `reason` are the reflection; `fallback` says it
    missed its contract and Pi judged instead (done when the executor answered).
    `model_calls` counts the executor's calls.
    """

    kind: Literal["plan_step_finished"] = "plan_step_finished"
    number: int
    revision: int = 0
    outcome: Literal["answered", "step_limit"]
    done: bool
    replan: bool
    reason: str
    fallback: bool = False
    model_calls: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Replanned:
    """Step `number` failed (or showed the plan wrong): the planner is asked again.
    `replans` counts them in this run, this one included, of at most `max_replans`."""

    kind: Literal["replanned"] = "replanned"
    number: int
    reason: str
    replans: int
    max_replans: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteChosen:
    """A router call chose how the request is handled (`mode = "auto"`).

    `fallback`: its answer missed the route contract, so the run goes on as `react`.
    """

    kind: Literal["route_chosen"] = "route_chosen"
    mode: Literal["direct", "react", "plan"]
    confidence: float | None = None
    fallback: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDelta:
    """Streamed output as it arrives (live streams only; traces keep the whole response)."""

    kind: Literal["model_delta"] = "model_delta"
    turn: int
    delta: str
    """The text, thinking, or a tool call's arguments (JSON text) that arrived."""
    channel: Literal["text", "thinking", "tool_call"] = "text"
    tool_call_id: str | None = None
    """The call a `tool_call` delta belongs to (None until the provider names it)."""
    name: str | None = None
    """The tool's name, on the first `tool_call` delta of a call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    kind: Literal["run_finished"] = "run_finished"
    status: str
    stop_reason: str
    steps: int
    output: Any
    usage: Usage
    metrics: dict[str, Any]
    error: str | None = None
    wall_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


Event: TypeAlias = (
    RunStarted
    | Transition
    | MessageAppended
    | ModelRequested
    | ModelResponded
    | ModelErrorEvent
    | ToolRetried
    | ToolResult
    | GuardTriggered
    | ContractChecked
    | ToolsSelected
    | JobStarted
    | ApprovalRequested
    | ApprovalGranted
    | ApprovalRejected
    | ChildRun
    | SecurityAudit
    | GuardrailTripped
    | Escalated
    | PlanCreated
    | PlanStepStarted
    | PlanStepFinished
    | Replanned
    | RouteChosen
    | ModelDelta
    | RunFinished
    | MemoryRecalled
    | MemoryWritten
)
