"""Running one claimed job: its tool under the worker's lease, then its ending, written
with its outbox event in one transaction (by `complete_job` / `fail_job`).

The tool runs through the same `pi_runtime.tools.execute` as an inline call (idempotency
key, timeout, transient failures retried with backoff, errors classified), with a
`checkpoint()` of its own around each attempt, and its value is encoded inside the
attempt as an inline result is. Whatever the job does (arguments its validators refuse
with any exception, a value no encoder takes, `sys.exit()`), it ends once, as a tool
error: a job left running would be run again by each worker that took it over.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any, Literal

from ..exceptions import UserError
from ..messages import ToolErrorInfo, ToolErrorKind, redact, repair_text, tool_error_info
from ..tools import Execution, ToolSpec, call_key, execute
from ..tools.arguments import rejection
from ..tools.result_text import encode_tool_result
from ._lease import Heartbeat
from ._stops import job_key
from .errors import LeaseLost, StoreError
from .progress import JobCheckpoint, checkpoint_scope
from .records import JobEnding, JobRecord
from .store import DEFAULT_LEASE_S, JobQueue

log = logging.getLogger("pi_runtime.durable")

JobOutcome = Literal["succeeded", "failed", "outcome_unknown", "lost", "cancelled"]
"""How an attempt ended; `lost`: the lease went elsewhere and nothing was written;
`cancelled`: the job was cancelled meanwhile (it ended so then) and the tool was stopped."""

Finish = Callable[[JobEnding], object]
"""Writes how a held job ended, called in a thread: `complete_job` or `fail_job` by
default; a worker's also delivers the result (`finish_job`). LeaseLost if the job is no
longer held; UserError if the ending cannot be stored."""


def store_finish(store: JobQueue, job: JobRecord, owner: str) -> Finish:
    """The default `Finish`: the ending written with its outbox event, to be delivered
    from there."""

    def finish(ending: JobEnding) -> object:
        if ending.status == "succeeded":
            return store.complete_job(
                job.id, owner, ending.result, max_result_bytes=ending.max_result_bytes
            )
        unknown = ending.status == "outcome_unknown"
        return store.fail_job(job.id, owner, ending.error or {}, outcome_unknown=unknown)

    return finish


async def execute_job(
    store: JobQueue,
    job: JobRecord,
    spec: ToolSpec | None,
    *,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    retry_base_s: float = 0.25,
    missing: ToolErrorInfo | None = None,
    finish: Finish | None = None,
) -> JobOutcome:
    """Run `job` (claimed by `owner`) with the tool `spec` and write how it ended with
    `finish` (default: `store_finish`); without a `spec`, it ends with `missing` (by
    default: no worker tool has its name)."""
    finish = finish or store_finish(store, job, owner)
    if spec is None:
        info = missing or tool_error_info(
            ToolErrorKind.UNKNOWN_TOOL,
            f"no worker tool is named {job.tool!r}",
            "start the worker with the session's tools importable (or --tools)",
        )
        return await _fail(finish, info)
    try:
        kwargs = spec.validate_python(job.arguments)
    except Exception as exc:  # a validator of the tool's own may raise anything
        return await _fail(finish, _rejected(exc))
    progress = JobCheckpoint(
        store, job.id, owner, state=job.checkpoint, attempt=job.attempts, lease_s=lease_s
    )
    if progress.resumed:
        log.info("job %s attempt %d resumes from its checkpoint", job.id, job.attempts)
    task = asyncio.create_task(
        _contained(
            execute(
                spec,
                kwargs,
                key=_key(job, spec),
                session_id=job.session_id,
                convert=_job_result,  # a result that cannot be stored is the tool's failure
                scope=lambda: checkpoint_scope(progress),
                passthrough=(StoreError,),  # a checkpoint could not be saved: not the tool's
                retry_base_s=retry_base_s,
            )
        )
    )

    def renew() -> None:
        store.renew_job_lease(job.id, owner, lease_s=lease_s)

    stops = store.stops()
    async with Heartbeat(
        renew, lease_s, on_lost=task.cancel, stops=stops, key=job_key(job.id)
    ) as beat:
        try:
            done: Execution = await task
        except asyncio.CancelledError:
            if beat.lost:
                return "cancelled" if beat.stopped else "lost"
            raise
        except StoreError as exc:  # a checkpoint could not be saved: stop this attempt
            log.warning("job %s: attempt abandoned: %s", job.id, exc)
            return "lost"
    if done.error is None:
        return await _complete(finish, spec, done.value)  # encoded by convert
    if done.error.kind == ToolErrorKind.TIMEOUT and not job.retry_safe:
        # cut off mid-call: whether its side effect happened cannot be confirmed
        unknown = ToolErrorInfo(
            kind=ToolErrorKind.OUTCOME_UNKNOWN, message=done.error.message, hint=done.error.hint
        )
        return await _fail(finish, unknown, outcome_unknown=True)
    return await _fail(finish, done.error)


def _key(job: JobRecord, spec: ToolSpec) -> str | None:
    if job.session_id is not None and job.tool_call_id is not None:
        return call_key(spec, job.session_id, job.tool_call_id)
    return call_key(spec, "job", job.id)


def _rejected(exc: Exception) -> ToolErrorInfo:
    """Why a job's arguments were refused, worded as the gate words it (redacted)."""
    message = redact(repair_text(rejection(exc)))
    return tool_error_info(ToolErrorKind.INVALID_ARGUMENTS, message)


def _job_result(value: Any) -> Any:
    """`value` as the plain JSON a job stores, encoded as an inline result is (lone
    surrogates repaired, NaN and infinities as strings) so it reads the same delivered.
    A value that cannot be encoded is a `ToolError`: the attempt's final failure, which
    no retry runs the tool again for."""
    text = encode_tool_result(value)
    return text if isinstance(value, str) else json.loads(text)


async def _contained(execution: Coroutine[Any, Any, Execution]) -> Execution:
    """`execution`, with a tool's SystemExit or GeneratorExit as its failure. Out of its
    task, either would end the worker (or its slot) and leave the job running, for every
    worker that took it over to run and die again."""
    try:
        return await execution
    except (SystemExit, GeneratorExit) as exc:
        message = f"the tool raised {type(exc).__name__}; a tool must return or raise an Exception"
        info = tool_error_info(ToolErrorKind.TOOL_ERROR, message)
        return Execution(error=info, error_class="semantic")


async def _complete(finish: Finish, spec: ToolSpec, result: Any) -> JobOutcome:
    ending = JobEnding(status="succeeded", result=result, max_result_bytes=spec.max_result_bytes)
    try:
        await asyncio.to_thread(finish, ending)
    except LeaseLost:
        return "lost"
    except UserError as exc:  # the store refuses it (a cap or a value it cannot write)
        message = redact(f"the result cannot be stored: {exc}")
        return await _fail(finish, tool_error_info(ToolErrorKind.TOOL_ERROR, message))
    return "succeeded"


async def _fail(
    finish: Finish, info: ToolErrorInfo, *, outcome_unknown: bool = False
) -> JobOutcome:
    error = {**asdict(info), "kind": str(info.kind)}
    ending = JobEnding(status="outcome_unknown" if outcome_unknown else "failed", error=error)
    try:
        await asyncio.to_thread(finish, ending)
    except LeaseLost:
        return "lost"
    return ending.status
