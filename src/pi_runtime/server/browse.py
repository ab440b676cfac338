"""The JSON the trace viewer reads, under `/v1` with the API's auth and tenancy.

    GET /v1/sessions?limit=50&after=ID   the caller's sessions, newest first, a page at a time
    GET /v1/runs/{run_id}/timeline       a run's timeline (`timeline.timeline`), with its
                                         pending approvals and the runs around it

A live run's trace is read as far as it was written (the recorder writes it at step
boundaries), so the timeline of a running run grows step by step.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from ..durable import NotFound
from ..durable.records import RunRecord
from ..durable.views import run_view
from ..messages import ToolResultMessage
from .api import RunId, _trace_path
from .auth import Caller, principal
from .config import public_model
from .errors import ApiError
from .state import ServerState, server_state
from .tenancy import ID_PATTERN, SEPARATOR, Principal
from .timeline import timeline

router = APIRouter(prefix="/v1", dependencies=[Depends(principal)], tags=["viewer"])

MAX_PAGE = 200
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid bearer token or login cookie."},
    404: {"description": "No such run or session (or not the caller's)."},
    422: {"description": "A query parameter out of bounds."},
}


@router.get("/sessions", summary="The caller's sessions, newest first", responses=_ERRORS)
async def list_sessions(
    request: Request,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Sessions per page.")] = 50,
    after: Annotated[
        str | None, Query(pattern=ID_PATTERN, description="The last session of the page before.")
    ] = None,
) -> dict[str, Any]:
    store = server_state(request).store
    prefix = "" if caller.tenant is None else f"{caller.tenant}{SEPARATOR}"
    cursor = caller.stored_id(after) if after is not None else None
    try:
        found = await asyncio.to_thread(
            store.list_sessions, prefix=prefix, limit=limit + 1, after=cursor
        )
    except NotFound:
        raise ApiError(404, f"no session {after!r} to list after") from None
    # the store lists by prefix; whose a session is stays the tenancy's to say
    found = [s for s in found if caller.owns(s.id)]
    page = found[:limit]
    return {
        "sessions": [
            {
                "session_id": caller.public_id(s.id),
                "status": s.status,
                "message_count": s.message_count,
                "created_at": s.created_at.isoformat(),
                "updated_at": s.updated_at.isoformat(),
            }
            for s in page
        ],
        "next": caller.public_id(page[-1].id) if len(found) > limit else None,
    }


@router.get(
    "/runs/{run_id}/timeline",
    summary="A run's timeline: steps, tokens and time, model requests, tool calls, plans",
    responses=_ERRORS,
)
async def run_timeline(run_id: RunId, request: Request, caller: Caller) -> dict[str, Any]:
    state = server_state(request)
    run = await asyncio.to_thread(state.store.get_run, run_id)
    if run is None or not caller.owns(run.session_id):
        raise ApiError(404, f"no run {run_id!r}")
    answer = await asyncio.to_thread(_timeline_of, state, run, caller)
    answer["live"] = state.hub.get(run_id) is not None
    return answer


def _timeline_of(state: ServerState, run: RunRecord, caller: Principal) -> dict[str, Any]:
    path = _trace_path(state, run.id, (run.result or {}).get("trace"))
    events = _read_written(path) if path is not None else []
    view = timeline(events)
    # A call a person approved ran before this run began: its result is in the session.
    unanswered = {
        c["call_id"] for c in view["tool_calls"] if c["status"] == "approved" and not c["result"]
    }
    if unanswered:
        view = timeline(events, results=_stored_results(state, run.session_id, unanswered))
    described = view.get("run")
    if isinstance(described, dict) and isinstance(described.get("model"), str):
        view["run"] = {**described, "model": public_model(described["model"])}  # no path
    runs = state.store.list_runs(run.session_id)
    pending = [
        a.pending.to_dict()
        for a in state.store.list_approvals(run.session_id)
        if a.run_id == run.id and a.status == "pending"
    ]
    return {
        **view,
        **run_view(run),
        "session_id": caller.public_id(run.session_id),
        "trace": path is not None,
        "pending_approvals": pending,
        "continued_by": next((r.id for r in runs if r.parent_run_id == run.id), None),
    }


def _stored_results(
    state: ServerState, session_id: str, call_ids: set[str]
) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    try:
        stored = state.store.load_messages(session_id)
    except NotFound:
        return found
    for m in stored:
        message = m.message
        if isinstance(message, ToolResultMessage) and message.tool_call_id in call_ids:
            found[message.tool_call_id] = {"content": message.content, "is_error": message.is_error}
    return found


def _read_written(path: Path) -> list[dict[str, Any]]:
    """The trace's whole lines: a live run's file may end in a line being written."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    events = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a damaged line: the rest still shows
        if isinstance(event, dict):
            events.append(event)
    return events
