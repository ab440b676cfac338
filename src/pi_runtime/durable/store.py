"""`Store`: the durable state of sessions, runs, async jobs and the data plane.

It is the union of narrow protocols, one per concern — `SessionStore`, `RunStore`,
`JobQueue`, `Outbox`, the data plane's own `DataStore` and long-term memory's
`MemoryStore` — so each consumer asks for the least it uses.

Every method is one transaction: it happens whole or not at all. Methods that act on
leased work (`*_job`, `renew_run_lease`, `finish_run`) take the lease `owner` and raise
`LeaseLost` when someone else holds it now: the caller must stop and write nothing more.
The store is synchronous; async code calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..data.storage import DataStore
from ..memory.facts import MemoryStore
from ..messages import Message, ToolResultMessage
from ..tools import PendingApproval
from ._stops import Stops
from ._watch import Watch
from .records import (
    ApprovalRecord,
    CancelResult,
    Decided,
    Delivery,
    FinishedJob,
    FinishedRun,
    JobEnding,
    JobRecord,
    OutboxEvent,
    RunRecord,
    SessionRecord,
    StoredMessage,
    TurnInputs,
    WaitRecord,
)

DEFAULT_LEASE_S = 30.0


@runtime_checkable
class SessionStore(Protocol):
    """Sessions and their messages."""

    def create_session(
        self, session_id: str | None = None, *, agent: dict[str, Any] | None = None
    ) -> SessionRecord:
        """A new `idle` session (Conflict if the id is taken); `agent` says how to rebuild
        the agent that continues it."""
        ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def list_sessions(
        self, *, prefix: str = "", limit: int = 50, after: str | None = None
    ) -> list[SessionRecord]:
        """A page of sessions, newest first: those whose ids start with `prefix` and hold
        no `/` after it (`"acme/"`: tenant acme's; `""`: those of no tenant). `after` is
        the last id of the previous page (NotFound if there is no such session)."""
        ...

    def set_session_status(
        self, session_id: str, status: str, *, expected_version: int
    ) -> SessionRecord:
        """Compare-and-set the status (Conflict unless the session is at that version)."""
        ...

    def cancel_session(self, session_id: str) -> CancelResult:
        """Stop waiting: pending waits are cancelled (each awaited call answered with a
        `cancelled` error), queued, running and awaiting runs stop, unfinished jobs are
        cancelled. Nothing is delivered to those calls afterwards. The holder of a
        running run and the workers of running jobs are told at once: they start no
        model call or tool run more, and the run's holder stores what it did
        (`finish_cancelled_run`)."""
        ...

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expect_seq: int | None = None,
    ) -> list[int]:
        """Store messages at the end; return their `seq`s. Conflict if a tool call would
        get a second result, or if `expect_seq` is not where they would land."""
        ...

    def load_messages(
        self, session_id: str, *, after_seq: int | None = None
    ) -> list[StoredMessage]: ...


@runtime_checkable
class RunStore(Protocol):
    """Runs of a session: created, claimed and held under a lease, finished."""

    def create_run(
        self,
        session_id: str,
        *,
        input: dict[str, Any] | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> RunRecord:
        """A user run: queued, or running under `owner`'s lease (Conflict if the session
        is busy or awaiting)."""
        ...

    def claim_run(
        self, owner: str, *, lease_s: float = DEFAULT_LEASE_S, max_attempts: int = 3
    ) -> RunRecord | None:
        """The oldest queued run (or one whose holder died), now running under a lease."""
        ...

    def renew_run_lease(
        self, run_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> RunRecord: ...

    def release_run(self, run_id: str, owner: str) -> RunRecord:
        """Give a held run back now (it was cut short): the next claim takes it over."""
        ...

    def finish_run(
        self,
        run_id: str,
        *,
        owner: str,
        status: str,
        stop_reason: str | None,
        result: dict[str, Any] | None = None,
        messages: Sequence[Message] = (),
        waits: Sequence[tuple[str, str]] = (),
        approvals: Sequence[PendingApproval] = (),
    ) -> FinishedRun:
        """End a held run: append its new `messages`, register its `waits`
        (`(tool_call_id, job_id)`) and its calls waiting for a person (`approvals`)
        (status `awaiting` only), record `result`, set the session's status; queue the
        continuation if every awaited result already arrived.
        A run ending otherwise cancels the unfinished jobs of the tool calls in
        `messages` (it answered them `cancelled`)."""
        ...

    def finish_cancelled_run(
        self,
        run_id: str,
        *,
        owner: str,
        result: dict[str, Any] | None = None,
        messages: Sequence[Message] = (),
    ) -> FinishedRun:
        """Store what a run a cancel stopped did (its new messages, every call answered,
        and its result), once, by its holder at the cancel while its lease lasts
        (LeaseLost otherwise). The run stays `stopped` / `cancelled`; the session keeps
        its status."""
        ...

    def stops(self) -> Stops | None:
        """Who tells this process's holders of runs and jobs, at once, that theirs was
        cancelled (None: nobody; they learn it at their next lease renewal)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def list_runs(self, session_id: str) -> list[RunRecord]: ...

    def turn_inputs(self, run: RunRecord) -> TurnInputs:
        """What running `run` (held) reads of its session, in one read: its messages, the
        runs its request came through, the decisions a continuation starts from."""
        ...


@runtime_checkable
class JobQueue(Protocol):
    """Background tool calls as jobs: queued, claimed under a lease, finished."""

    def enqueue_job(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        session_id: str | None = None,
        tool_call_id: str | None = None,
        retry_safe: bool = True,
        max_attempts: int = 3,
        run_id: str | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> JobRecord:
        """A queued job; the same (session, tool call) enqueued again returns the same job.

        With `run_id` and `owner` (the run launching it), the run's lease is renewed in
        the same transaction: a run cancelled or taken over enqueues nothing (LeaseLost).
        """
        ...

    def get_job(self, job_id: str) -> JobRecord | None: ...

    def list_jobs(self, session_id: str) -> list[JobRecord]: ...

    def claim_job(self, owner: str, *, lease_s: float = DEFAULT_LEASE_S) -> JobRecord | None:
        """The oldest queued job (or one whose holder died), now running under a lease.
        An interrupted job that is not retry-safe ends `outcome_unknown` instead."""
        ...

    def renew_job_lease(
        self, job_id: str, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> JobRecord: ...

    def release_job(self, job_id: str, owner: str) -> JobRecord:
        """Give a held job back now (its attempt was cut short, e.g. a drain ran out of
        time): the next claim takes it over as after an expired lease."""
        ...

    def cancel_job(self, job_id: str) -> JobRecord:
        """End a job that has not finished as `cancelled`; a worker running it is told at
        once (`stops`), stops it and writes nothing more. A finished job is returned as
        it is."""
        ...

    def stops(self) -> Stops | None:
        """As `RunStore.stops`."""
        ...

    def checkpoint_job(
        self, job_id: str, owner: str, checkpoint: Any, *, lease_s: float = DEFAULT_LEASE_S
    ) -> JobRecord:
        """Commit progress (and renew the lease): a resumed attempt starts from here."""
        ...

    def complete_job(
        self, job_id: str, owner: str, result: Any, *, max_result_bytes: int | None = None
    ) -> JobRecord:
        """`succeeded`, with its `completed` outbox event in the same transaction; the event
        carries the tool's `max_result_bytes`, so delivery cuts the result as an inline
        call would without importing the tool."""
        ...

    def fail_job(
        self, job_id: str, owner: str, error: dict[str, Any], *, outcome_unknown: bool = False
    ) -> JobRecord:
        """`failed` (or `outcome_unknown`), with its `failed` outbox event, together."""
        ...


@runtime_checkable
class Outbox(Protocol):
    """Waits of tool calls on jobs, and the delivery of finished jobs' results."""

    def register_wait(
        self, session_id: str, tool_call_id: str, job_id: str, *, run_id: str | None = None
    ) -> WaitRecord:
        """`tool_call_id` waits for `job_id`. A job that already finished is still
        delivered (`job_done` is then True)."""
        ...

    def list_waits(self, session_id: str) -> list[WaitRecord]: ...

    def claim_outbox_event(
        self, owner: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> OutboxEvent | None:
        """The oldest undelivered event whose job is awaited, under a lease."""
        ...

    def deliver(
        self,
        event_id: int,
        message: ToolResultMessage,
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Delivery:
        """Append the result under the awaited `tool_call_id`, mark the wait and the event,
        and queue the `server_result` run if it was the last awaited — one transaction.
        Second copies are skipped (`duplicate`); a cancelled wait's are `ignored`.

        With `owner`, the continuation starts running under `owner`'s lease instead of
        queued: a worker runs it at once, without a second claim."""
        ...

    def finish_job(
        self,
        job_id: str,
        owner: str,
        ending: JobEnding,
        *,
        message: ToolResultMessage | None = None,
        take: bool = False,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> FinishedJob:
        """End the job `owner` holds as `ending` says (as `complete_job` / `fail_job`)
        and, when its call is awaited, deliver `message` (the result as the model reads
        it) as `deliver` would — one transaction: the worker that ran the job delivers
        it without claiming its event. With `take`, the continuation starts running
        under `owner`'s lease. A call not awaited yet is delivered later, from its event."""
        ...


@runtime_checkable
class Approvals(Protocol):
    """Tool calls waiting for a person, and the decisions on them (each taken once)."""

    def list_approvals(self, session_id: str) -> list[ApprovalRecord]: ...

    def approve_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        arguments: dict[str, Any],
        fingerprint: str | None = None,
        owner: str,
        lease_s: float = DEFAULT_LEASE_S,
        retry_safe: bool = True,
        max_attempts: int = 3,
    ) -> ApprovalRecord:
        """Approve a pending call to run with `arguments`: it becomes a job of the session,
        running under `owner`'s lease and awaited by the waiting run. NotFound if no such
        call waits; Conflict if it was decided already, or its fingerprint is not
        `fingerprint` (when given) or no longer that of its stored arguments."""
        ...

    def settle_approval(
        self,
        session_id: str,
        tool_call_id: str,
        message: ToolResultMessage,
        *,
        owner: str,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Decided:
        """The approved call ran: end its job (held by `owner`), deliver `message` under
        the call's id, and queue the continuation (running under `owner`'s lease) if
        nothing else is awaited — one transaction. LeaseLost if a worker took the job."""
        ...

    def reject_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        reason: str,
        message: ToolResultMessage,
        fingerprint: str | None = None,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Decided:
        """Reject a pending call: answer it with `message` (a `rejected` tool error) and
        queue the continuation if nothing else is awaited (running under `owner`'s lease,
        when given) — one transaction. Refused as `approve_call` is."""
        ...


@runtime_checkable
class Store(SessionStore, RunStore, JobQueue, Outbox, Approvals, DataStore, MemoryStore, Protocol):
    """Implemented by `SQLiteStore` and `PostgresStore`; made by `open_store(url)`."""

    @property
    def backend(self) -> str:
        """`sqlite` or `postgresql`."""
        ...

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        ...

    def close(self) -> None:
        """Release the connections."""

    def migrate(self) -> list[str]:
        """Apply the migrations the database lacks; return the names applied now."""
        ...

    def migrations(self) -> list[str]:
        """Names of the schema migrations applied to the database, oldest first."""
        ...

    def watch(self) -> Watch | None:
        """A subscription to "work may be claimable" notices (PostgreSQL LISTEN), so an
        idle worker waits to be told rather than polling; None where the backend has
        none (SQLite: poll)."""
        ...

    def claim_work(
        self,
        owner: str,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        max_attempts: int = 3,
        look_first: bool = True,
    ) -> OutboxEvent | RunRecord | JobRecord | None:
        """The most urgent work, under a lease: an outbox event (`claim_outbox_event`),
        else a run (`claim_run`, `max_attempts` as there), else a job (`claim_job`).
        One transaction; where nothing is claimable no row is written or locked.

        `look_first`: on SQLite, read whether anything is claimable before taking the
        write lock, so an idle look never waits for it. A worker whose last look found
        work passes False: it is likely to find more, and the read would be one more
        transaction per claim."""
        ...

    def claim_batch(
        self,
        owners: Sequence[str],
        *,
        lease_s: float = DEFAULT_LEASE_S,
        max_attempts: int = 3,
        look_first: bool = True,
    ) -> list[OutboxEvent | RunRecord | JobRecord]:
        """`claim_work` for several owners at once (a worker's idle slots): at most one
        piece of work per owner, most urgent first, the k-th held by `owners[k]`, in one
        transaction. At most one run of a session is taken. Owners must be distinct, so
        each lease still fences exactly one holder."""
        ...

    def purge_expired(self) -> int:
        """Delete expired references and snapshots; return how many went."""
        ...


@runtime_checkable
class TurnStore(SessionStore, RunStore, JobQueue, Approvals, Protocol):
    """What running a turn needs: its session, its run, the jobs it launches, and the
    decisions a continuation starts from."""
