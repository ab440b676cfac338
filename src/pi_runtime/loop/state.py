"""The run's state: an immutable value each transition replaces."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..messages import AssistantMessage, Message, StopReason, Usage
from ..observe import LoopPhase
from ..tools import PendingApproval, ToolOutcome


# no slots, unlike the messages and events: a state is copied four times a turn, and a
# copy of its `__dict__` is one C call where slots take one descriptor call per field
@dataclass(frozen=True, kw_only=True)
class RunState:
    """Where a run stands.

    Attributes:
        phase: the phase to run next.
        messages: the conversation so far (history included).
        pending: inputs OBSERVE has yet to normalise into messages.
        anchor: index of the request's user message (-1: none).
        steps: model calls made in this run.
        prior_steps: model calls earlier runs made for the same request.
        prior_tokens: tokens earlier runs used for the same request.
        prior_cost_usd: what earlier runs' model calls cost (None: unknown).
        turns: assistant messages in the conversation (history included).
        next_tool_choice: tool choice for the next model call only.
        response: the last assistant message, for ACT.
        outcomes: the last tool outcomes, for REFLECT.
        actions: canonical hashes of the request's recent tool calls (loop detection).
        results: hashes of recent (call, result) pairs (no-progress detection).
        tool_calls: tool calls the model made for the request, earlier runs included.
        tool_limit_notice: the model was told the request's tool calls are used up.
        waits: (tool_call_id, job_id) of calls whose results background jobs compute.
        approvals: calls waiting for a person's approval.
        repairs: contract repair turns sent for the request.
    """

    phase: LoopPhase = "observe"
    messages: tuple[Message, ...] = ()
    pending: tuple[Message, ...] = ()
    anchor: int = -1
    steps: int = 0
    prior_steps: int = 0
    prior_tokens: int = 0
    prior_cost_usd: float | None = 0.0
    turns: int = 0
    usage: Usage = field(default_factory=lambda: Usage(cost_usd=0.0))
    next_tool_choice: str = "auto"
    consecutive_errors: int = 0
    response: AssistantMessage | None = None
    outcomes: tuple[ToolOutcome, ...] = ()
    actions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    tool_calls: int = 0
    tool_limit_notice: bool = False
    waits: tuple[tuple[str, str], ...] = ()
    approvals: tuple[PendingApproval, ...] = ()
    repairs: int = 0
    contract_errors: tuple[str, ...] = ()
    stop_reason: StopReason | None = None
    output: Any = None
    error: str | None = None

    @property
    def request_steps(self) -> int:
        """Model calls made for the request, earlier runs included."""
        return self.prior_steps + self.steps

    @property
    def request_tokens(self) -> int:
        """Tokens used for the request, earlier runs included."""
        return self.prior_tokens + self.usage.total_tokens

    @property
    def request_cost_usd(self) -> float | None:
        """What the request's model calls cost so far, earlier runs included (None:
        some call's price is unknown)."""
        if self.prior_cost_usd is None or self.usage.cost_usd is None:
            return None
        return self.prior_cost_usd + self.usage.cost_usd


_NAMES = frozenset(f.name for f in fields(RunState))


def evolve(state: RunState, **changes: Any) -> RunState:
    """`dataclasses.replace(state, **changes)` in a sixth of the time.

    Every transition makes a new state, four or five a turn; `replace` spends most of
    its time checking and setting fields one by one through the frozen `__init__`. A
    RunState has no `__post_init__` to skip, so copying its fields gives the same value.
    """
    return evolved(state, changes)


def evolved(state: RunState, changes: dict[str, Any]) -> RunState:
    """`evolve` with the changes in a dict of their own (the caller's to give away):
    spared packing them into keywords a second time on the way."""
    if not _NAMES.issuperset(changes):
        unknown = sorted(changes.keys() - _NAMES)
        raise TypeError(f"RunState has no field {unknown[0]!r}")
    # `copy` clones the table in one go; filling a new instance's empty `__dict__` key
    # by key cost a third more
    values = state.__dict__.copy()
    values.update(changes)
    new = object.__new__(RunState)
    _SET_FIELDS(new, values)  # frozen: its own __setattr__ refuses
    return new


_SET_FIELDS = RunState.__dict__["__dict__"].__set__
"""Sets an instance's `__dict__` directly: `object.__setattr__` looks it up by name first."""
