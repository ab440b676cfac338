"""A job of one of a session's MCP tools, run by a worker.

Such a job is an approved call whose approver died while it ran: a worker takes it over
when its lease ends. The call reaches the server the way the approver's did, through the
session's own agent (its MCP servers as the session defines them), whose sessions with
the servers end with the job. A call that is not idempotent never gets here: it is
answered `outcome_unknown` when taken over.
"""

from __future__ import annotations

import logging

from ..exceptions import UserError
from ..loop.approvals import tool_of
from ..models import Model
from .executor import JobOutcome, execute_job
from .recipe import Recipe
from .records import JobRecord
from .store import JobQueue

log = logging.getLogger("pi_runtime.worker")


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
        log.warning("job %s: the session's agent cannot be built here: %s", job.id, exc)
        return None

    async def run() -> JobOutcome:
        try:
            spec = await tool_of(agent, job.tool)
        except UserError as exc:  # a server cannot be listed: the tool is not reachable
            log.warning("job %s: %s", job.id, exc)
            spec = None
        return await execute_job(store, job, spec, owner=owner, lease_s=lease_s)

    return await agent.mcp.closing(run())
