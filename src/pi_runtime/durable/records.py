"""What the store hands back: plain frozen records, one per row kind, and their statuses.

The data plane's records (snapshots, pages, references) are the data layer's own classes,
re-exported here: the store returns exactly what `pi_runtime.data.DataStore` declares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..data.storage import PageRecord as PageRecord
from ..data.storage import ReferenceRecord as ReferenceRecord
from ..data.storage import SnapshotRecord as SnapshotRecord
from ..messages import Message
from ..tools import PendingApproval

SessionStatus: TypeAlias = Literal[
    "idle",  # created, no run yet
    "queued",  # a run is queued for it
    "running",  # a run holds it
    "awaiting_server_tool",  # its last run ended waiting for async results
    "awaiting_approval",  # its last run ended waiting for a person to decide on calls
    "completed",  # its last run completed
    "stopped",  # its last run was stopped by a guard
    "failed",  # its last run failed
    "cancelled",  # waiting was cancelled; nothing is delivered after
]
RunKind: TypeAlias = Literal["user", "server_result"]
# A run's status is `RunStatus` once finished, `queued` / `running` before.
RunRecordStatus: TypeAlias = Literal[
    "queued", "running", "completed", "stopped", "failed", "awaiting"
]
JobStatus: TypeAlias = Literal[
    "queued", "running", "succeeded", "failed", "cancelled", "outcome_unknown"
]
WaitStatus: TypeAlias = Literal["pending", "delivered", "cancelled"]
ApprovalStatus: TypeAlias = Literal["pending", "approved", "rejected", "cancelled"]
EventKind: TypeAlias = Literal["completed", "failed"]
# How an outbox event ended: appended to its session, skipped as a second copy, or
# dropped because its wait was cancelled.
EventOutcome: TypeAlias = Literal["delivered", "duplicate", "ignored"]

SESSION_STATUSES: tuple[SessionStatus, ...] = (
    "idle",
    "queued",
    "running",
    "awaiting_server_tool",
    "awaiting_approval",
    "completed",
    "stopped",
    "failed",
    "cancelled",
)
# A session in one of these may take a new user run.
SESSION_READY: frozenset[SessionStatus] = frozenset(
    {"idle", "completed", "stopped", "failed", "cancelled"}
)
JOB_TERMINAL: frozenset[JobStatus] = frozenset(
    {"succeeded", "failed", "cancelled", "outcome_unknown"}
)
RUN_FINAL: frozenset[RunRecordStatus] = frozenset({"completed", "stopped", "failed", "awaiting"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """A persistent conversation.

    Attributes:
        version: bumped by every status change; the compare-and-set token of
            `set_session_status`.
        message_count: messages stored so far; the next message gets this `seq`.
        agent: how to rebuild the agent that continues the session (model spec, tools,
            limits), as the caller wrote it.
    """

    id: str
    status: SessionStatus
    version: int
    message_count: int
    agent: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A message of a session, at its place `seq`, with the run that produced it."""

    seq: int
    message: Message
    run_id: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One run of a session: a user turn, or a continuation after delivered results.

    Attributes:
        parent_run_id: for a `server_result` run, the run that ended awaiting the results
            it continues from (a run has at most one continuation).
        input: what the run starts from (e.g. `{"prompt": ...}` for a user run).
        result: the `RunResult` JSON once finished (without its messages, which are stored
            as the session's messages).
    """

    id: str
    session_id: str
    kind: RunKind
    status: RunRecordStatus
    stop_reason: str | None
    parent_run_id: str | None
    input: dict[str, Any] | None
    result: dict[str, Any] | None
    attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishedRun:
    """`finish_run`'s answer: the run as stored, the continuation it queued, if any, and
    the jobs it launched that were cancelled because it ended without awaiting them."""

    run: RunRecord
    continuation: RunRecord | None
    jobs_cancelled: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnding:
    """How a held job ends, as `finish_job` writes it.

    Attributes:
        status: `succeeded` (with `result`), or `failed` / `outcome_unknown` (with
            `error`, a `{kind, message, hint}` object).
        max_result_bytes: the tool's cap, carried by the completion event.
    """

    status: Literal["succeeded", "failed", "outcome_unknown"]
    result: Any = None
    error: dict[str, Any] | None = None
    max_result_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """An async tool call executed by workers.

    Attributes:
        retry_safe: an attempt cut short may run again (the tool is idempotent); if False
            an interrupted attempt ends `outcome_unknown`, never silently retried.
        checkpoint: the last progress the job committed; a resumed attempt starts there.
    """

    id: str
    session_id: str | None
    tool_call_id: str | None
    tool: str
    arguments: dict[str, Any]
    status: JobStatus
    retry_safe: bool
    attempts: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    checkpoint: Any
    result: Any
    error: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def done(self) -> bool:
        return self.status in JOB_TERMINAL


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitRecord:
    """A tool call of a session waiting for a job's result.

    Attributes:
        run_id: the run that ended awaiting this result.
        job_done: the job had already finished when this record was read (its event is
            in the outbox and will be delivered).
    """

    session_id: str
    tool_call_id: str
    job_id: str
    run_id: str | None
    status: WaitStatus
    event_id: int | None
    created_at: datetime
    resolved_at: datetime | None
    job_done: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """A session's tool call waiting for (or given) a person's decision.

    Attributes:
        run_id: the run that ended awaiting this decision.
        arguments: the call's arguments as the gate checked them; `fingerprint` is theirs.
        status: `pending`, `approved` (it runs as job `job_id`, awaited like a background
            call), `rejected` (answered with `reason`) or `cancelled` (the session was).
        decided_arguments: the arguments it was approved with (edited, or the same).
    """

    session_id: str
    tool_call_id: str
    run_id: str
    tool: str
    arguments: dict[str, Any]
    fingerprint: str
    status: ApprovalStatus
    decided_arguments: dict[str, Any] | None
    reason: str | None
    job_id: str | None
    created_at: datetime
    decided_at: datetime | None

    @property
    def pending(self) -> PendingApproval:
        """As `RunResult.pending_approvals` lists it."""
        return PendingApproval(
            call_id=self.tool_call_id,
            tool=self.tool,
            arguments=self.arguments,
            fingerprint=self.fingerprint,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """A decision as stored: the approval, and the continuation queued by it (running
    under the decider's lease when it asked to take it), if it was the last awaited."""

    approval: ApprovalRecord
    continuation: RunRecord | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEvent:
    """A claimed notice that a job finished, with what delivering it needs.

    `session_id` and `tool_call_id` are those of the wait (the call to answer); `result`
    and `error` are the job's.
    """

    id: int
    job_id: str
    kind: EventKind
    payload: dict[str, Any]
    session_id: str
    tool_call_id: str
    wait_status: WaitStatus
    tool: str
    result: Any
    error: dict[str, Any] | None
    attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What `deliver` did with an event.

    Attributes:
        outcome: `delivered`, `duplicate` (already delivered or answered: skipped) or
            `ignored` (the wait was cancelled).
        seq: the `seq` of the appended tool message, when delivered.
        continuation: the `server_result` run queued by this delivery, if it completed
            the set of results its session was waiting for.
        inputs: what running the continuation reads (`RunStore.turn_inputs`), read in
            the delivering transaction when the deliverer took the continuation.
    """

    event_id: int
    outcome: EventOutcome
    session_id: str
    tool_call_id: str
    seq: int | None = None
    continuation: RunRecord | None = None
    inputs: TurnInputs | None = None


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """`finish_job`'s answer: the job as stored, and the delivery of its result when
    its call was awaited (None: nobody awaits it yet; its event waits for the wait)."""

    job: JobRecord
    delivery: Delivery | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelResult:
    """What `cancel_session` stopped."""

    session: SessionRecord
    waits_cancelled: tuple[str, ...]  # tool_call_ids, each answered with a `cancelled` error
    runs_cancelled: tuple[str, ...]
    jobs_cancelled: tuple[str, ...]
    approvals_cancelled: tuple[str, ...] = ()  # calls no person decided on, answered the same


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInputs:
    """What running a held run reads of its session, in one read (`RunStore.turn_inputs`).

    Attributes:
        messages: the session's conversation as it stands.
        requested: the runs a continuation's request came through: its parent first, back
            to the user run that started it (empty for a user run).
        approvals: the decisions taken on the calls a continuation's parent left waiting
            (empty for a user run).
    """

    messages: list[StoredMessage]
    requested: list[RunRecord]
    approvals: list[ApprovalRecord]


def requested_runs(run: RunRecord, get_run: Callable[[str], RunRecord | None]) -> list[RunRecord]:
    """The runs `run`'s request came through (`TurnInputs.requested`), read by `get_run`."""
    requested: list[RunRecord] = []
    current: RunRecord | None = run
    seen: set[str] = set()
    while current is not None and current.kind != "user" and current.id not in seen:
        seen.add(current.id)
        current = get_run(current.parent_run_id) if current.parent_run_id else None
        if current is not None:
            requested.append(current)
    return requested
