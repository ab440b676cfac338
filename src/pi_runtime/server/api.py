"""The `/v1` HTTP API: runs, approvals, sessions and traces (bearer auth, tenancy).

    POST /v1/sessions/{id}/runs                 {"message", "agent"?} → RunResult, or AG-UI SSE
    POST /v1/sessions/{id}/approvals/{call_id}  {"decision": "approve"|"reject", …} → the same
    GET  /v1/sessions/{id}                      what `pi session show --json` prints (its
                                                `agent`: the served name and model)
    GET  /v1/runs/{run_id}/trace                the run's trace events
    GET  /v1/runs/{run_id}/events               a live run's AG-UI events, from its start
    GET  /v1/agents                             the served agents

`Accept: text/event-stream` streams AG-UI events; anything else gets JSON.

No answer holds a path of the server's files or the agent's recipe: a result's `trace` is
the run's trace URL here, model names lose their file paths and server URLs
(`config.public_model`), and a session's `agent` is the served agent's name and model.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..durable import NotFound, StoreError
from ..durable.views import cancel_view, session_view
from ..exceptions import UserError
from ..loop import RunResult
from ..loop.call_ids import CallIds
from ..loop.definition import AgentDefinition
from ..messages import ToolResultMessage
from ..observe import default_trace_dir, read_trace
from .agui import AguiMapper
from .auth import Caller, principal
from .config import public_model
from .errors import ApiError
from .state import ServerState, server_state
from .stream import LiveRun, agui_stream, api_error, result_of
from .tenancy import ID_PATTERN, Principal

router = APIRouter(prefix="/v1", dependencies=[Depends(principal)], tags=["v1"])

SessionId = Annotated[
    str, PathParam(pattern=ID_PATTERN, description="The session's id (created on first run).")
]
RunId = Annotated[str, PathParam(pattern=ID_PATTERN, description="A run's id.")]
CallId = Annotated[
    str,
    PathParam(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$", description="The waiting call's id."),
]
MAX_MESSAGE_CHARS = 200_000
SSE = "text/event-stream"
TRACE_PATH = "/v1/runs/{run_id}/trace"
"""Where a run's trace is served: a result's `trace` (the file's path is the server's)."""
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid bearer token."},
    404: {"description": "No such session, run, call or agent (or not the caller's)."},
    409: {"description": "The session is busy or awaiting, or the decision is refused."},
    413: {"description": "The body is over the limit."},
    422: {"description": "Malformed JSON, or a body that does not fit the schema."},
}

log = logging.getLogger("pi_runtime.server")


class RunRequest(BaseModel):
    """A user turn."""

    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    agent: str | None = Field(
        default=None, description="A served agent's name (default: the first served)."
    )


class DecisionRequest(BaseModel):
    """A person's decision on a call waiting for approval."""

    model_config = ConfigDict(extra="forbid")
    decision: Literal["approve", "reject"]
    arguments: dict[str, Any] | None = Field(
        default=None, description="Run it with these arguments instead (approve only)."
    )
    fingerprint: str | None = Field(
        default=None, max_length=128, description="The fingerprint reviewed: refused if stale."
    )
    reason: str | None = Field(
        default=None, max_length=4000, description="Why (reject only): the model reads it."
    )

    @model_validator(mode="after")
    def _fits_decision(self) -> DecisionRequest:
        if self.decision == "reject" and not (self.reason or "").strip():
            raise ValueError("a rejection needs a reason (the model reads it)")
        if self.decision == "reject" and self.arguments is not None:
            raise ValueError("a rejection takes no arguments; an approval may")
        if self.decision == "approve" and self.reason is not None:
            raise ValueError("an approval takes no reason; a rejection does")
        return self


@router.post(
    "/sessions/{session_id}/runs",
    summary="Run a turn: the RunResult as JSON, or AG-UI events (Accept: text/event-stream)",
    response_model=None,
    responses={200: {"content": {SSE: {}}}, **_ERRORS},
)
async def run(
    session_id: SessionId, body: RunRequest, request: Request, caller: Caller
) -> JSONResponse | StreamingResponse:
    state = server_state(request)
    if body.agent is not None:
        state.agent_named(body.agent)  # 404 before anything is stored
    work = partial(state.turn, caller.stored_id(session_id), body.message, body.agent)
    return await _answer(request, state, caller, session_id, state.hub.start(work))


@router.post(
    "/sessions/{session_id}/approvals/{call_id}",
    summary="Approve or reject a waiting call; the session goes on (as `pi approve`)",
    response_model=None,
    responses={200: {"content": {SSE: {}}}, **_ERRORS},
)
async def approve(
    session_id: SessionId,
    call_id: CallId,
    body: DecisionRequest,
    request: Request,
    caller: Caller,
) -> JSONResponse | StreamingResponse:
    from ..loop.approvals import Decision

    state = server_state(request)
    stored = caller.stored_id(session_id)
    await asyncio.to_thread(_check_waiting, state, stored, call_id)
    try:
        decision = Decision(
            call_id=call_id,
            approve=body.decision == "approve",
            arguments=body.arguments,
            reason=body.reason,
            fingerprint=body.fingerprint,
        )
    except UserError as exc:
        raise ApiError(422, str(exc)) from None
    live = state.hub.start(partial(state.decision, stored, decision))
    return await _answer(request, state, caller, session_id, live, decided=call_id)


@router.post(
    "/sessions/{session_id}/cancel",
    summary="Stop a session: waits, approvals, runs and jobs (as `pi session cancel`)",
    responses=_ERRORS,
)
async def cancel(session_id: SessionId, request: Request, caller: Caller) -> dict[str, Any]:
    """Awaited calls and calls waiting for approval are answered `cancelled`, its runs
    stop (one running here or in a worker ends `cancelled`), its jobs are cancelled, and
    nothing is delivered to it afterwards. Cancelling a session that is done changes
    nothing and says so with empty lists."""
    state = server_state(request)
    try:
        done = await asyncio.to_thread(state.store.cancel_session, caller.stored_id(session_id))
    except NotFound:
        raise ApiError(404, f"no session {session_id!r}") from None
    return cancel_view(session_id, done)


@router.get(
    "/sessions/{session_id}",
    summary="A session: status, messages, runs, jobs, approvals (`pi session show --json`)",
    responses=_ERRORS,
)
async def show_session(session_id: SessionId, request: Request, caller: Caller) -> dict[str, Any]:
    state = server_state(request)
    try:
        view = await asyncio.to_thread(session_view, state.store, caller.stored_id(session_id))
    except NotFound:
        raise ApiError(404, f"no session {session_id!r}") from None
    view["session_id"] = session_id
    # the stored recipe (files, imports, instructions, MCP commands) stays the server's
    recipe = view.get("agent")
    model = recipe.get("model") if isinstance(recipe, dict) else None
    view["agent"] = {
        "name": state.served_name(recipe),
        "model": public_model(model if isinstance(model, str) else None),
    }
    view["messages"] = [_public_message(m) for m in view["messages"]]
    return view


@router.get("/runs/{run_id}/trace", summary="A run's trace: its events in order", responses=_ERRORS)
async def trace(run_id: RunId, request: Request, caller: Caller) -> dict[str, Any]:
    state = server_state(request)
    run = await asyncio.to_thread(state.store.get_run, run_id)
    if run is None or not caller.owns(run.session_id):
        raise ApiError(404, f"no run {run_id!r}")
    path = _trace_path(state, run_id, (run.result or {}).get("trace"))
    if path is None:
        raise ApiError(404, f"run {run_id!r} left no trace on this server", code="no_trace")
    try:
        events = await asyncio.to_thread(read_trace, path)
    except (OSError, ValueError):
        raise ApiError(404, f"run {run_id!r} left no readable trace", code="no_trace") from None
    return {
        "run_id": run_id,
        "session_id": caller.public_id(run.session_id),
        "status": run.status,
        "stop_reason": run.stop_reason,
        "events": [_public_event(e) for e in events],
    }


@router.get(
    "/runs/{run_id}/events",
    summary="Follow a run running in this server: its AG-UI events from the start",
    response_class=StreamingResponse,
    responses={200: {"content": {SSE: {}}}, **_ERRORS},
)
async def follow(run_id: RunId, request: Request, caller: Caller) -> StreamingResponse:
    state = server_state(request)
    live = state.hub.get(run_id)
    run = await asyncio.to_thread(state.store.get_run, run_id) if live is not None else None
    if live is None or run is None or not caller.owns(run.session_id):
        raise ApiError(404, f"no run {run_id!r} is running in this server", code="not_live")
    called = await asyncio.to_thread(_called_before, state, run.session_id, run_id)
    mapper = AguiMapper(caller.public_id(run.session_id), call_ids=called, trace_path=TRACE_PATH)
    return _sse(agui_stream(live, mapper))


@router.get("/agents", summary="The agents this server runs, and the tools each may call")
async def agents(request: Request) -> dict[str, Any]:
    config = server_state(request).config
    return {
        "default": config.default_agent,
        "agents": [{"name": name, "tools": _tools_of(d)} for name, d in config.agents.items()],
    }


def _tools_of(definition: AgentDefinition) -> list[dict[str, Any]]:
    """The tools an agent's model may call, as a client reads them: by name, not by the
    modules that define them (which stay the server's own)."""
    try:
        specs = definition.load_tools()  # imported when the server started: no new import
    except UserError:
        return []
    allowed = set(definition.allow) if definition.allow is not None else None
    return [
        {
            "name": spec.name,
            "description": spec.description,
            "requires_approval": spec.requires_approval or spec.name in definition.approval,
            "background": spec.background,
        }
        for spec in specs
        if allowed is None or spec.name in allowed
    ]


async def _answer(
    request: Request,
    state: ServerState,
    caller: Principal,
    session_id: str,
    live: LiveRun,
    *,
    decided: str | None = None,
) -> JSONResponse | StreamingResponse:
    """The run as the client asked for it: AG-UI events, or the RunResult as JSON."""
    if SSE not in request.headers.get("accept", ""):
        result = await result_of(live)
        return JSONResponse(_public(result, session_id))
    await live.started()
    if not live.events and live.done:  # refused before it began: an HTTP error
        failure = live.failure()
        if failure is not None:
            raise api_error(failure)
    approvals = f"/v1/sessions/{session_id}/approvals/{{call_id}}"
    stored = caller.stored_id(session_id)
    called = await asyncio.to_thread(_called_before, state, stored, live.run_id)
    mapper = AguiMapper(
        session_id, approvals_path=approvals, call_ids=called, trace_path=TRACE_PATH
    )

    async def resolve(call_id: str) -> ToolResultMessage | None:
        messages = await asyncio.to_thread(state.store.load_messages, stored)
        for m in messages:
            if isinstance(m.message, ToolResultMessage) and m.message.tool_call_id == call_id:
                return m.message
        return None

    return _sse(agui_stream(live, mapper, resolve=resolve, decided=decided))


def _sse(events: Any) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events, media_type=SSE, headers=headers)


def _public(result: RunResult, session_id: str) -> dict[str, Any]:
    """The `RunResult` JSON as the client sees it: its session id, the trace's URL."""
    data = result.to_dict()
    data["session_id"] = session_id
    data["trace"] = TRACE_PATH.format(run_id=result.run_id) if result.trace is not None else None
    data["messages"] = [_public_message(m) for m in data["messages"]]
    return data


def _public_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message as JSON, its model named without a file path or server URL."""
    model = message.get("model")
    return {**message, "model": public_model(model)} if isinstance(model, str) else message


def _public_event(event: Any) -> Any:
    """A trace event as a client reads it: models named as in `_public_message`."""
    if not isinstance(event, dict):
        return event
    out = _public_message(event)
    inner = out.get("message")
    return {**out, "message": _public_message(inner)} if isinstance(inner, dict) else out


def _called_before(state: ServerState, session_id: str, run_id: str | None) -> set[str]:
    """The ids of the session's calls before run `run_id`: the run replaces a streamed id
    that is one of them, so the stream must know them (its own run's it sees go by)."""
    try:
        stored = state.store.load_messages(session_id)
    except StoreError as exc:  # none known: the stream goes on with the provider's ids
        log.warning("session %s: its calls could not be read for the stream: %s", session_id, exc)
        return set()
    return CallIds([m.message for m in stored if m.run_id != run_id]).used


def _check_waiting(state: ServerState, session_id: str, call_id: str) -> None:
    """404 unless the session exists and has call `call_id` waiting or decided; 409 if it
    was decided already."""
    if state.store.get_session(session_id) is None:
        raise ApiError(404, "no such session")
    for approval in state.store.list_approvals(session_id):
        if approval.tool_call_id == call_id:
            if approval.status != "pending":
                raise ApiError(
                    409, f"call {call_id!r} was already {approval.status}", code="already_decided"
                )
            return
    raise ApiError(404, f"no call {call_id!r} waits for approval in this session")


def _trace_path(state: ServerState, run_id: str, recorded: object) -> Path | None:
    """Where the run's trace is: as its result records it, else in this server's folder."""
    candidates = [Path(recorded)] if isinstance(recorded, str) else []
    candidates.append((state.config.trace_dir or default_trace_dir()) / f"{run_id}.jsonl")
    return next((p for p in candidates if p.is_file()), None)
