"""`Agent.approve` / `Agent.reject`: a person's decisions on calls a run waits for.

Kept apart from `agent.py` as a base class of `Agent`; the decisions themselves are
`pi_runtime.loop.approvals` (in memory) and `pi_runtime.durable.approvals` (stored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, cast

from ..exceptions import UserError
from ._sync import run_blocking
from .approvals import Decision, DecisionTarget, decide_in_memory
from .run_result import RunResult

if TYPE_CHECKING:
    from .agent import Agent


class Decisions:
    """`Agent`'s methods that decide calls waiting for approval (see the module)."""

    async def approve(
        self,
        target: RunResult | DecisionTarget,
        call_id: str,
        arguments: dict[str, Any] | None = None,
        *,
        fingerprint: str | None = None,
    ) -> RunResult:
        """Approve a call an `awaiting_approval` run waits for: it runs once, and the run
        continues when no other call waits.

        Args:
            target: the awaiting `RunResult` (kept in memory), or a stored session
                (`pi_runtime.durable.StoredSession`), where the decision is durable.
            call_id: the waiting call (`RunResult.pending_approvals[i].call_id`).
            arguments: edited arguments to run it with; checked against its schema.
            fingerprint: the fingerprint reviewed; a call that differs is refused.

        Returns:
            The continued run's result, or, while other calls still wait, an `awaiting`
            result listing them. A refused decision raises UserError and changes nothing.
        """
        decision = Decision(
            call_id=call_id, approve=True, arguments=arguments, fingerprint=fingerprint
        )
        return await _decide(self, target, decision)

    async def reject(
        self,
        target: RunResult | DecisionTarget,
        call_id: str,
        *,
        reason: str,
        fingerprint: str | None = None,
    ) -> RunResult:
        """Reject a waiting call: it never runs, and the model reads a `rejected` tool
        error carrying `reason`. Otherwise as `approve`."""
        decision = Decision(call_id=call_id, approve=False, reason=reason, fingerprint=fingerprint)
        return await _decide(self, target, decision)

    def approve_sync(
        self,
        target: RunResult | DecisionTarget,
        call_id: str,
        arguments: dict[str, Any] | None = None,
        *,
        fingerprint: str | None = None,
    ) -> RunResult:
        """`approve` for code without an event loop."""
        return _blocking(self.approve(target, call_id, arguments, fingerprint=fingerprint))

    def reject_sync(
        self,
        target: RunResult | DecisionTarget,
        call_id: str,
        *,
        reason: str,
        fingerprint: str | None = None,
    ) -> RunResult:
        """`reject` for code without an event loop."""
        return _blocking(self.reject(target, call_id, reason=reason, fingerprint=fingerprint))


def _blocking(coro: Coroutine[Any, Any, RunResult]) -> RunResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_blocking(coro)
    coro.close()
    raise UserError("call approve/reject with `await` inside a running event loop")


async def _decide(
    mixed: Decisions, target: RunResult | DecisionTarget, decision: Decision
) -> RunResult:
    agent = cast("Agent", mixed)  # Decisions is a base of Agent only
    if isinstance(target, RunResult):
        return await decide_in_memory(agent, target, decision)
    if isinstance(target, DecisionTarget):
        return await target.decide(agent, decision)
    raise UserError(
        "decide on an awaiting RunResult or a stored session "
        f"(pi_runtime.durable.StoredSession), not {type(target).__name__}"
    )
