"""A job of one of a session's MCP tools, run by a worker.

Such a job is an approved call whose approver died while it ran: a worker takes it over
when its lease ends. The call reaches the server the way the approver's did, through the
session's own agent (its MCP servers as the session defines them), whose sessions with
the servers end with the job. A call that is not idempotent never gets here: it is
answered `outcome_unknown` when taken over. A worker that cannot reach the servers
answers the call saying so (`unknown_tool`, as a worker without the tool always has),
with a hint about the servers rather than about `--tools`.
"""

from __future__ import annotations

import logging

from ..exceptions import UserError
from ..loop.approvals import reach_tool
from ..messages import ToolErrorKind, redact, tool_error_info
from ..models import Model
from .executor import JobOutcome, execute_job
from .recipe import Recipe
from .records import JobRecord
from .store import JobQueue

log = logging.getLogger("pi_runtime.worker")

UNREACHABLE_HINT = (
    "The worker that took this call over could not reach the tool on the session's MCP "
    "servers, so the call did not run there. Tell the user: a worker must be able to start "
    "or reach those servers as the agent file configures them (the program installed, its "
    "variables set, the URL reachable)."
)
UNBUILDABLE_HINT = (
    "The worker that took this call over could not build the session's agent, so the call "
    "did not run there. Tell the user: a worker must be able to import the agent's tools "
    "and start or reach its MCP servers as the agent file configures them."
)


async def run_mcp_job(
    store: JobQueue,
    job: JobRecord,
    recipe: Recipe,
    *,
    owner: str,
    lease_s: float,
    models: dict[str, Model],
) -> JobOutcome | None:
    """Run `job` with the MCP tool of `recipe`'s servers it names; None when `recipe`
    has no MCP servers (the job is of no tool here)."""
    if not recipe.mcp:
        return None
    try:
        agent = recipe.build_agent(trace_dir=False, models=models)
    except UserError as exc:
        why = f"the session's agent cannot be built: {redact(str(exc))}"
        return await _cannot_run(store, job, why, UNBUILDABLE_HINT, owner=owner, lease_s=lease_s)

    async def run() -> JobOutcome:
        spec, why = await reach_tool(agent, job.tool)
        if spec is not None:
            return await execute_job(store, job, spec, owner=owner, lease_s=lease_s)
        if why is not None:
            why = f"the session's MCP servers cannot be reached: {why}"
        else:
            why = "the session's MCP servers do not list it"
        return await _cannot_run(store, job, why, UNREACHABLE_HINT, owner=owner, lease_s=lease_s)

    return await agent.mcp.closing(run())


async def _cannot_run(
    store: JobQueue, job: JobRecord, why: str, hint: str, *, owner: str, lease_s: float
) -> JobOutcome:
    """End `job` saying why this worker cannot run its tool (`why` is already redacted)."""
    log.warning("job %s: %s", job.id, why)
    message = f"tool {job.tool!r} cannot run in the worker that took the call over: {why}"
    info = tool_error_info(ToolErrorKind.UNKNOWN_TOOL, message, hint)
    return await execute_job(store, job, None, owner=owner, lease_s=lease_s, missing=info)
