"""Running one claimed job: its tool under the worker's lease, then its ending, written
with its outbox event in one transaction (by `complete_job` / `fail_job`).

The tool runs like an inline call (checked arguments, idempotency key, timeout, transient
failures retried with backoff, errors classified), with a `checkpoint()` of its own. A
sync tool runs in a daemon thread, so a stuck one never holds a worker that must exit.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, Literal

import pydantic_core
from pydantic import ValidationError

from ..exceptions import UserError
from ..messages import ToolErrorInfo, redact
from ..tools import IDEMPOTENCY_PARAM, SESSION_PARAM, ToolSpec, classify, idempotency_key
from ._lease import Heartbeat, in_daemon_thread
from .errors import LeaseLost, StoreError
from .progress import JobCheckpoint, checkpoint_scope
from .records import JobRecord
from .store import DEFAULT_LEASE_S, Store

log = logging.getLogger("pi_runtime.durable")

JobOutcome = Literal["succeeded", "failed", "outcome_unknown", "lost"]
"""How an attempt ended; `lost`: the lease went elsewhere and nothing was written."""

_BACKOFF_MAX_S = 8.0


@dataclass(frozen=True, slots=True)
class _Done:
    value: Any = None
    error: ToolErrorInfo | None = None


async def execute_job(
    store: Store,
    job: JobRecord,
    spec: ToolSpec | None,
    *,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    retry_base_s: float = 0.25,
) -> JobOutcome:
    """Run `job` (claimed by `owner`) with the tool `spec` and write how it ended."""
    if spec is None:
        error = {
            "kind": "unknown_tool",
            "message": f"no worker tool is named {job.tool!r}",
            "hint": "start the worker with the session's tools importable (or --tools)",
        }
        return await _fail(store, job, owner, error)
    try:
        kwargs = spec.validate_python(job.arguments)
    except ValidationError as exc:
        error = {"kind": "invalid_arguments", "message": redact(str(exc)), "hint": ""}
        return await _fail(store, job, owner, error)
    if spec.takes_idempotency_key:
        kwargs[IDEMPOTENCY_PARAM] = None if spec.idempotent else _key(job)
    if spec.takes_session_id:
        kwargs[SESSION_PARAM] = job.session_id
    progress = JobCheckpoint(
        store, job.id, owner, state=job.checkpoint, attempt=job.attempts, lease_s=lease_s
    )
    if progress.resumed:
        log.info("job %s attempt %d resumes from its checkpoint", job.id, job.attempts)
    task = asyncio.create_task(_attempts(spec, kwargs, progress, retry_base_s))

    def renew() -> None:
        store.renew_job_lease(job.id, owner, lease_s=lease_s)

    async with Heartbeat(renew, lease_s, on_lost=task.cancel) as beat:
        try:
            done = await task
        except asyncio.CancelledError:
            if beat.lost:
                return "lost"
            raise
        except StoreError as exc:  # a checkpoint could not be saved: stop this attempt
            log.warning("job %s: attempt abandoned: %s", job.id, exc)
            return "lost"
    if done.error is None:
        return await _complete(store, job, owner, done.value)
    error = {"kind": done.error.kind, "message": done.error.message, "hint": done.error.hint}
    if done.error.kind == "timeout" and not job.retry_safe:
        # cut off mid-call: whether its side effect happened cannot be confirmed
        error["kind"] = "outcome_unknown"
        return await _fail(store, job, owner, error, outcome_unknown=True)
    return await _fail(store, job, owner, error)


def _key(job: JobRecord) -> str:
    if job.session_id is not None and job.tool_call_id is not None:
        return idempotency_key(job.session_id, job.tool_call_id)
    return idempotency_key("job", job.id)


async def _attempts(
    spec: ToolSpec, kwargs: dict[str, Any], progress: JobCheckpoint, retry_base_s: float
) -> _Done:
    number = 0
    while True:
        number += 1
        try:
            with checkpoint_scope(progress):
                return _Done(value=await _invoke(spec, kwargs))
        except StoreError:
            raise
        except Exception as exc:
            if isinstance(exc, TimeoutError) and spec.timeout_s is not None:
                exc = TimeoutError(f"{spec.name!r} did not finish within {spec.timeout_s:g}s")
            cls, info = classify(exc)
            if cls == "transient" and number <= spec.retries:
                ceiling = min(_BACKOFF_MAX_S, retry_base_s * 2.0 ** (number - 1))
                await asyncio.sleep(ceiling / 2 + random.uniform(0, ceiling / 2))
                continue
            return _Done(error=info)


async def _invoke(spec: ToolSpec, kwargs: dict[str, Any]) -> Any:
    work = spec.function(**kwargs) if spec.is_async else in_daemon_thread(spec.function, **kwargs)
    if spec.timeout_s is None:
        return await work
    return await asyncio.wait_for(work, spec.timeout_s)


async def _complete(store: Store, job: JobRecord, owner: str, value: Any) -> JobOutcome:
    result = pydantic_core.to_jsonable_python(value, fallback=str)
    try:
        await asyncio.to_thread(store.complete_job, job.id, owner, result)
    except LeaseLost:
        return "lost"
    except UserError as exc:  # not plain JSON (NaN, infinity)
        error = {"kind": "tool_error", "message": redact(f"the result cannot be stored: {exc}")}
        return await _fail(store, job, owner, error)
    return "succeeded"


async def _fail(
    store: Store,
    job: JobRecord,
    owner: str,
    error: dict[str, Any],
    *,
    outcome_unknown: bool = False,
) -> JobOutcome:
    try:
        await asyncio.to_thread(
            store.fail_job, job.id, owner, error, outcome_unknown=outcome_unknown
        )
    except LeaseLost:
        return "lost"
    return "outcome_unknown" if outcome_unknown else "failed"
