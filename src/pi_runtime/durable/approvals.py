"""Deciding the calls a stored session waits for, from any process, days later.

    store = open_store("sqlite:///.pi/pi.db")
    result = await agent.approve(StoredSession(store, "s1"), "call_0_1")

`decide` (what `pi approve` and `pi reject` run) checks the decision against the stored
call (fingerprint, conversation, edited arguments against the schema), takes it in the
store — once: a second decision is refused — and, for an approval, runs the call under
the job lease that transaction gave it, with its idempotency key, then settles its
result. The run the decision completes is continued at once by the decider, like a
delivered background result (`run_held`); while other calls still wait, the result says
which (`awaiting`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, replace
from typing import Any

from ..exceptions import UserError
from ..loop import Agent, RunResult
from ..loop.approvals import (
    Checked,
    Decision,
    check_decision,
    run_approved,
    still_awaiting,
    tool_of,
)
from ..messages import Usage, redact
from ..observe import Event
from ._lease import Heartbeat
from ._stops import job_key
from .errors import Conflict, LeaseLost, NotFound
from .recipe import DEFAULT_JOB_ATTEMPTS, stored_recipe
from .records import ApprovalRecord, Decided
from .sessions import EventSink, request_from, run_held
from .store import DEFAULT_LEASE_S, Store


def default_owner() -> str:
    """A lease owner name for a process deciding by hand."""
    return f"approver-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session kept in a store, to decide on with `Agent.approve` / `Agent.reject`.

    Args:
        store: the store holding it.
        session_id: its id.
        owner: the lease owner of the work the decision starts (default: this process).
        lease_s: the lease's length; another worker takes the work over after this long
            if this process dies.
    """

    store: Store
    session_id: str
    owner: str | None = None
    lease_s: float = DEFAULT_LEASE_S

    async def decide(self, agent: Agent, decision: Decision) -> RunResult:
        return await decide(
            self.store,
            self.session_id,
            decision,
            agent=agent,
            owner=self.owner or default_owner(),
            lease_s=self.lease_s,
        )


async def decide(
    store: Store,
    session_id: str,
    decision: Decision,
    *,
    agent: Agent,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    on_event: EventSink | None = None,
) -> RunResult:
    """Take `decision` on session `session_id` and continue it (see the module).

    `agent` is the session's agent (`stored_recipe(session.agent).build_agent()`).
    Raises UserError, with nothing changed, when the decision is refused: no such
    session or waiting call, a call already decided, a stale fingerprint, edited
    arguments the schema refuses. LeaseLost if the approved call's job was taken over
    by a worker while it ran (the worker finishes it; nothing runs twice). A
    continuation that cannot start once the decision is stored (its traces cannot be
    written, say) is no refusal: the result is `failed`, its error says the decision
    was recorded.
    """
    approval = await asyncio.to_thread(_waiting, store, session_id, decision.call_id, agent)
    stored = await asyncio.to_thread(store.load_messages, session_id)
    checked = await check_decision(agent, approval.pending, decision, [s.message for s in stored])
    try:
        if decision.approve:
            decided = await _approve(store, approval, checked, agent, owner, lease_s)
        else:
            assert checked.answer is not None and decision.reason is not None
            decided = await asyncio.to_thread(
                store.reject_call,
                session_id,
                approval.tool_call_id,
                reason=decision.reason,
                message=checked.answer,
                fingerprint=approval.fingerprint,
                owner=owner,
                lease_s=lease_s,
            )
    except (NotFound, Conflict) as exc:  # decided meanwhile by someone else
        raise UserError(str(exc)) from None
    run = decided.continuation if decided is not None else None
    if run is None or run.lease_owner != owner:
        return await asyncio.to_thread(_now, store, approval, checked.event)
    inputs = await asyncio.to_thread(store.turn_inputs, run)
    request = request_from(run, inputs.requested)
    try:
        turn = await run_held(
            store,
            run,
            agent=agent,
            owner=owner,
            lease_s=lease_s,
            job_max_attempts=await asyncio.to_thread(_attempts, store, session_id),
            on_event=on_event,
            request_elapsed_s=request.elapsed_s,
            inputs=inputs,
        )
    except UserError as exc:
        # The decision stands (stored, the call run); only the continuation could not
        # start, and `run_held` stored it failed. Not a refusal: say what happened.
        return _continuation_failed(run.id, session_id, redact(str(exc)))
    return turn.result


def _continuation_failed(run_id: str, session_id: str, error: str) -> RunResult:
    """The result of a decided session whose continuation failed to start."""
    return _no_run(
        run_id,
        session_id,
        status="failed",
        stop_reason="internal_error",
        error=f"the decision was recorded, but the session could not continue: {error}",
    )


def _no_run(run_id: str, session_id: str, **fields: Any) -> RunResult:
    """A result for a session after a decision that ran no model (`fields`: its status,
    stop reason and the rest that differ)."""
    return RunResult(
        output=None,
        steps=0,
        usage=Usage(cost_usd=0.0),
        metrics={},
        messages=(),
        trace=None,
        run_id=run_id,
        session_id=session_id,
        **fields,
    )


def _waiting(store: Store, session_id: str, call_id: str, agent: Agent) -> ApprovalRecord:
    """The pending approval of `call_id` (UserError saying why there is none)."""
    session = store.get_session(session_id)
    if session is None:
        raise UserError(f"no session {session_id!r}")
    if agent.definition is not None and not agent.definition.same_agent(
        stored_recipe(session.agent)
    ):
        raise UserError(f"session {session_id!r} keeps another agent; decide with that one")
    approvals = store.list_approvals(session_id)
    waiting = [a.tool_call_id for a in approvals if a.status == "pending"]
    for approval in approvals:
        if approval.tool_call_id != call_id:
            continue
        if approval.status != "pending":
            when = approval.decided_at.isoformat() if approval.decided_at else "earlier"
            after = (
                f"; it runs as job {approval.job_id} (if its approver died, `pi worker` "
                "finishes it and continues the session)"
                if approval.job_id and session.status != "completed"
                else ""
            )
            raise UserError(f"call {call_id!r} was already {approval.status} ({when}){after}")
        return approval
    if not waiting:
        raise UserError(f"session {session_id!r} is {session.status}: no call waits for approval")
    raise UserError(
        f"no call {call_id!r} waits for approval in session {session_id!r}; "
        f"waiting: {', '.join(waiting)}"
    )


async def _approve(
    store: Store,
    approval: ApprovalRecord,
    checked: Checked,
    agent: Agent,
    owner: str,
    lease_s: float,
) -> Decided | None:
    """Claim the decision (the call becomes a job held by `owner`), run the call under
    that lease, and settle its result; None if the session was cancelled while the call
    ran (it was stopped at once; its job ended cancelled)."""
    spec = await tool_of(agent, approval.tool)
    assert spec is not None  # check_decision found it
    session_id, call_id = approval.session_id, approval.tool_call_id
    assert checked.call.arguments is not None
    approved = await asyncio.to_thread(
        store.approve_call,
        session_id,
        call_id,
        arguments=checked.call.arguments,
        fingerprint=approval.fingerprint,
        owner=owner,
        lease_s=lease_s,
        retry_safe=spec.idempotent,
        max_attempts=_attempts(store, session_id),
    )
    assert approved.job_id is not None
    job_id = approved.job_id
    task = asyncio.create_task(run_approved(agent, checked, session_id))

    def renew() -> None:
        store.renew_job_lease(job_id, owner, lease_s=lease_s)

    async with Heartbeat(
        renew, lease_s, on_lost=task.cancel, stops=store.stops(), key=job_key(job_id)
    ) as beat:
        try:
            message = await task
        except asyncio.CancelledError:
            if beat.stopped:  # the session was cancelled while the call ran
                return None
            if beat.lost:
                raise LeaseLost(
                    f"call {call_id!r}: its job {job_id!r} was taken over by a worker, which "
                    "finishes it and continues the session"
                ) from None
            raise
    return await asyncio.to_thread(
        store.settle_approval, session_id, call_id, message, owner=owner, lease_s=lease_s
    )


def _attempts(store: Store, session_id: str) -> int:
    session = store.get_session(session_id)
    if session is None or session.agent is None:
        return DEFAULT_JOB_ATTEMPTS
    return stored_recipe(session.agent).job_max_attempts


def _now(store: Store, decided: ApprovalRecord, event: Event) -> RunResult:
    """The session's run after a decision that did not complete it: still awaiting the
    calls and jobs listed, or stopped when the session was cancelled meanwhile."""
    run_id = decided.run_id
    pending = tuple(
        a.pending
        for a in store.list_approvals(decided.session_id)
        if a.run_id == run_id and a.status == "pending"
    )
    waits = tuple(
        (w.tool_call_id, w.job_id)
        for w in store.list_waits(decided.session_id)
        if w.run_id == run_id and w.status == "pending"
    )
    messages = [s.message for s in store.load_messages(decided.session_id)]
    base = _no_run(
        run_id, decided.session_id, status="awaiting", stop_reason="awaiting_tool", waits=waits
    )
    result = still_awaiting(base, messages, pending, (event,))
    if pending or waits:
        return result
    error = "the session was cancelled; the decision was recorded but nothing continues"
    return replace(result, status="stopped", stop_reason="cancelled", error=error)
