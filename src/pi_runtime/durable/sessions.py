"""Running an agent inside a persistent session, by the store's protocol.

A turn: `create_run` under a lease (or a run a worker claimed) → load the conversation →
`Agent.run` with a launcher that enqueues background calls as jobs → `finish_run` with
the new messages and the waits, in one transaction. The lease is renewed while the agent
works; a run whose lease was lost writes nothing (another holder redoes it).

    store = open_store("sqlite:///.pi/pi.db")
    session, recipe = open_session(store, "s1", definition_here(model="scripted:run.json"))
    turn = run_blocking(run_turn(store, "s1", "hello", agent=recipe.build_agent(),
                                 owner="cli-1"))
    turn.result.status   # "awaiting" when a background job must finish first
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..exceptions import UserError
from ..loop import Agent, RunResult
from ..loop.run_result import unanswered
from ..messages import (
    Message,
    ToolCall,
    Usage,
    redact,
    redact_url,
)
from ..observe import ApprovalGranted, ApprovalRejected, Event
from ..tools import Launcher, ToolSpec, fingerprint
from ._lease import Heartbeat
from ._runs import StillStoring
from ._stops import run_key
from .errors import Conflict, LeaseLost
from .recipe import DEFAULT_JOB_ATTEMPTS, Recipe, definition_here, stored_recipe
from .records import ApprovalRecord, RunRecord, SessionRecord, TurnInputs, requested_runs
from .store import DEFAULT_LEASE_S, JobQueue, RunStore, SessionStore, TurnStore

EventSink = Callable[[Event], None]

# How long a new turn waits for a run a cancel stopped to store what it did (its holder
# heard the cancel at once; it runs out only if the holder died, with its lease).
_STILL_STORING_WAIT_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTurn:
    """A finished run of a session.

    Attributes:
        run: the run as stored after `finish_run`.
        result: what the agent returned (its messages are the whole conversation).
        continuation: the `server_result` run queued at once, when every awaited result
            had already arrived by the time the run finished.
    """

    run: RunRecord
    result: RunResult
    continuation: RunRecord | None


def open_session(
    store: SessionStore, session_id: str, recipe: Recipe | None = None, *, same_agent: bool = True
) -> tuple[SessionRecord, Recipe]:
    """The session and its stored agent definition; created with `recipe` if it does not
    exist.

    A session keeps the agent it was created with (its workers rebuild that one): with
    `same_agent`, a definition of another agent (limits aside) is a UserError.
    """
    session = store.get_session(session_id)
    if session is None:
        wanted = recipe or definition_here()
        if wanted.base_url is not None and redact_url(wanted.base_url) != wanted.base_url:
            # the session stores its agent: a credential in the URL would be stored too
            raise UserError(
                f"session {session_id!r}: the server URL {redact_url(wanted.base_url)} holds "
                "credentials, and a session stores its agent; give the key in the "
                "provider's environment variable (e.g. OPENAI_API_KEY) instead"
            )
        try:
            session = store.create_session(session_id, agent=wanted.to_dict())
        except Conflict:  # created meanwhile by another process: use that one
            session = store.get_session(session_id)
            if session is None:
                raise
    stored = stored_recipe(session.agent)
    if recipe is not None and same_agent and not recipe.same_agent(stored):
        raise UserError(
            f"session {session_id!r} runs model {stored.model or 'local'!r} with tools "
            f"{list(stored.tools)}"
            + (f" from {stored.source}" if stored.source else "")
            + "; a session keeps its agent: start a new session to change it"
        )
    return session, stored


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """The user request a run serves: its user run's input and the time spent so far.

    Attributes:
        input: the user run's input (`prompt`, and the `tool_choice` and `limits` given
            for this request, if any).
        elapsed_s: seconds the request's earlier runs took (time spent waiting for
            background jobs is not counted).
    """

    input: dict[str, Any]
    elapsed_s: float = 0.0

    @property
    def limits(self) -> dict[str, Any]:
        value = self.input.get("limits")
        return dict(value) if isinstance(value, dict) else {}


def request_of(store: RunStore, run: RunRecord) -> Request:
    """The request `run` serves: itself for a user run, else the user run its chain of
    continuations started from."""
    return request_from(run, requested_runs(run, store.get_run))


def request_from(run: RunRecord, requested: list[RunRecord]) -> Request:
    """The request `run` serves, from the runs it came through (`TurnInputs.requested`)."""
    elapsed = sum(
        max(0.0, (r.finished_at - r.started_at).total_seconds())
        for r in requested
        if r.started_at and r.finished_at
    )
    first = requested[-1] if requested else run
    user = first if first.kind == "user" else None
    return Request(input=dict((user.input if user else None) or {}), elapsed_s=elapsed)


def store_launcher(
    store: JobQueue,
    run: RunRecord,
    owner: str,
    *,
    lease_s: float = DEFAULT_LEASE_S,
    max_attempts: int = DEFAULT_JOB_ATTEMPTS,
) -> Launcher:
    """Starts a background call of `run` as a job of its session (the same call → the
    same job).

    The run's lease is renewed in the enqueueing transaction: a run that was cancelled,
    or taken over by another worker, starts no job. A call that is not idempotent is not retry-safe: if its
    worker dies mid-call, the job ends `outcome_unknown` instead of running again.
    """

    def enqueue(call: ToolCall, spec: ToolSpec, arguments: dict[str, Any]) -> str:
        job = store.enqueue_job(
            spec.name,
            arguments,
            session_id=run.session_id,
            tool_call_id=call.id,
            retry_safe=spec.idempotent,
            max_attempts=max_attempts,
            run_id=run.id,
            owner=owner,
            lease_s=lease_s,
        )
        return job.id

    async def launch(
        call: ToolCall, spec: ToolSpec, arguments: dict[str, Any], key: str | None
    ) -> str:
        return await asyncio.to_thread(enqueue, call, spec, arguments)

    return launch


async def run_turn(
    store: TurnStore,
    session_id: str,
    prompt: str,
    *,
    agent: Agent,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    job_max_attempts: int = DEFAULT_JOB_ATTEMPTS,
    on_event: EventSink | None = None,
    tool_choice: str | None = None,
    limits: dict[str, Any] | None = None,
) -> SessionTurn:
    """A user turn: a new run of the session under `owner`'s lease, run and finished.

    `tool_choice` (the request's first model call) and `limits` (overriding the
    session's for this request, continuations included) are stored with the run, so a
    worker that takes the request over uses them too; `agent` must already apply them.

    A session just cancelled while a run of it was running is waited for (up to 5 s)
    until that run's holder has stored what it did.

    Raises:
        Conflict: the session is busy, or awaiting results of background jobs.
        LeaseLost: the lease was lost mid-run; nothing of the run was stored.
    """
    if tool_choice is not None:
        agent.validate_tool_choice(tool_choice)
    given: dict[str, Any] = {"prompt": prompt}
    if tool_choice is not None:
        given["tool_choice"] = tool_choice
    if limits:
        given["limits"] = dict(limits)
    waited = 0.0
    while True:
        try:
            run = await asyncio.to_thread(
                store.create_run, session_id, input=given, owner=owner, lease_s=lease_s
            )
            break
        except StillStoring:  # a cancelled run's holder stores what it did: soon over
            if waited >= _STILL_STORING_WAIT_S:
                raise
            await asyncio.sleep(0.05)
            waited += 0.05
    return await run_held(
        store,
        run,
        agent=agent,
        owner=owner,
        lease_s=lease_s,
        job_max_attempts=job_max_attempts,
        on_event=on_event,
    )


async def run_held(
    store: TurnStore,
    run: RunRecord,
    *,
    agent: Agent,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    job_max_attempts: int = DEFAULT_JOB_ATTEMPTS,
    on_event: EventSink | None = None,
    request_elapsed_s: float = 0.0,
    inputs: TurnInputs | None = None,
) -> SessionTurn:
    """Run and finish a run `owner` holds: a user run (from its prompt) or a
    `server_result` continuation (from the conversation as it stands).

    `inputs`: what the caller already read of the session (`store.turn_inputs(run)`);
    read here when not given.

    The guards cover the whole user request: a continuation's agent counts the
    request's earlier model calls, tokens and tool calls from the conversation, and
    `request_elapsed_s` (see `request_of`) against its wall clock.
    """
    given = run.input or {}
    prompt = given.get("prompt") if run.kind == "user" else None
    choice = given.get("tool_choice") if run.kind == "user" else "auto"
    if inputs is None:
        inputs = await asyncio.to_thread(store.turn_inputs, run)
    history = [s.message for s in inputs.messages]
    prelude = decisions_from(inputs.approvals)
    options: dict[str, Any] = {
        "history": history,
        "session_id": run.session_id,
        "run_id": run.id,
        "next_tool_choice": choice if isinstance(choice, str) else None,
        "request_elapsed_s": request_elapsed_s,
        "launcher": store_launcher(
            store, run, owner, lease_s=lease_s, max_attempts=job_max_attempts
        ),
    }
    if prelude:  # a continuation (no prompt): `agent.run` opens its trace with them
        options["_prelude"] = prelude
    cancelled: list[RunResult] = []  # what the run did, if a cancel stops it
    options["_on_cancel"] = cancelled.append
    task = asyncio.create_task(_execute(agent, prompt, options, on_event))

    def renew() -> None:
        store.renew_run_lease(run.id, owner, lease_s=lease_s)

    stops = store.stops()
    async with Heartbeat(
        renew, lease_s, on_lost=task.cancel, stops=stops, key=run_key(run.id)
    ) as beat:
        try:
            result = await task
        except asyncio.CancelledError:
            if beat.lost:  # cancelled (else taken over: then `_wind_up` writes nothing)
                ended = cancelled[0] if cancelled else None
                return await _wind_up(store, run, owner, history, ended)
            raise
        except UserError as exc:  # the run could not start (e.g. nothing to continue)
            await asyncio.to_thread(
                store.finish_run,
                run.id,
                owner=owner,
                status="failed",
                stop_reason="internal_error",
                result={
                    "status": "failed",
                    "stop_reason": "internal_error",
                    "error": redact(str(exc)),
                },
            )
            raise
    new = list(result.messages[len(history) :])
    new += unanswered(result, new)
    try:
        finished = await asyncio.to_thread(
            store.finish_run,
            run.id,
            owner=owner,
            status=result.status,
            stop_reason=result.stop_reason,
            result=summary(result),
            messages=new,
            waits=result.waits if result.status == "awaiting" else (),
            approvals=result.pending_approvals if result.status == "awaiting" else (),
        )
    except LeaseLost:  # cancelled as it ended (else taken over: nothing is written)
        return await _wind_up(store, run, owner, history, result)
    return SessionTurn(run=finished.run, result=result, continuation=finished.continuation)


async def _wind_up(
    store: TurnStore,
    run: RunRecord,
    owner: str,
    history: list[Message],
    ended: RunResult | None,
) -> SessionTurn:
    """Store what a run a cancel stopped did, as its holder (`finish_cancelled_run`):
    its new messages, every call it left unanswered answered `cancelled`, its result.
    `ended`: the run's result (`Agent.run` hands it over as a cancel stops it); None
    when the run never started, so that it did nothing.

    Raises:
        LeaseLost: the run was taken over, not cancelled (or its lease ran out first):
            nothing was written.
    """
    if ended is None:
        ended = _not_started(run, history)
    error = ended.error if ended.stop_reason == "cancelled" else None
    result = replace(
        ended, status="stopped", stop_reason="cancelled", error=error or "the run was cancelled"
    )
    new = list(result.messages[len(history) :])
    new += unanswered(result, new)
    try:
        finished = await asyncio.to_thread(
            store.finish_cancelled_run, run.id, owner=owner, result=summary(result), messages=new
        )
    except LeaseLost:
        raise LeaseLost(f"run {run.id!r}: the lease was lost mid-run") from None
    result = replace(result, messages=(*history, *new))
    return SessionTurn(run=finished.run, result=result, continuation=None)


def _not_started(run: RunRecord, history: list[Message]) -> RunResult:
    """The result of a run a cancel stopped before it began."""
    return RunResult(
        status="stopped",
        stop_reason="cancelled",
        output=None,
        steps=0,
        usage=Usage(cost_usd=None),
        metrics={},
        messages=tuple(history),
        trace=None,
        run_id=run.id,
        session_id=run.session_id,
        error="the session was cancelled before the run began",
    )


def decisions_from(approvals: list[ApprovalRecord]) -> tuple[Event, ...]:
    """The decisions a continuation starts from (`TurnInputs.approvals`: those a person
    took on the calls its parent run left waiting), as the events that open its trace."""
    events: list[Event] = []
    for a in approvals:
        if a.status == "approved" and a.decided_arguments is not None:
            edited = fingerprint(a.decided_arguments) != a.fingerprint
            events.append(
                ApprovalGranted(
                    tool_call_id=a.tool_call_id,
                    name=a.tool,
                    fingerprint=a.fingerprint,
                    arguments=a.decided_arguments,
                    edited=edited,
                )
            )
        elif a.status == "rejected":
            events.append(
                ApprovalRejected(
                    tool_call_id=a.tool_call_id,
                    name=a.tool,
                    fingerprint=a.fingerprint,
                    reason=a.reason or "",
                )
            )
    return tuple(events)


async def _execute(
    agent: Agent, prompt: str | None, options: dict[str, Any], on_event: EventSink | None
) -> RunResult:
    if on_event is None:
        return await agent.run(prompt, **options)
    # a continuation streams too (`pi serve` relays an approval's continued run); the
    # options carry its `_prelude`, which `run_stream`'s signature does not take. As
    # `RunStream`, except that a cancel returns only once the run has ended (and handed
    # over what it did, for `_wind_up` to keep).
    queue: asyncio.Queue[Event] = asyncio.Queue()
    running = asyncio.create_task(agent.run(prompt, _live=queue, **options))
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            try:
                await asyncio.wait({getter, running}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                on_event(getter.result())
            if running.done():
                while not queue.empty():
                    on_event(queue.get_nowait())
                return running.result()
    finally:
        if not running.done():
            running.cancel()
            await asyncio.wait({running})


def summary(result: RunResult) -> dict[str, Any]:
    """The `RunResult` JSON stored with a run: all but the messages, which the session
    stores once each."""
    data = result.to_dict()
    data.pop("messages", None)
    return data
