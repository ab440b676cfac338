"""Checkpoints: a long tool commits its progress so a restarted job resumes from there.

A tool asks for the checkpoint of the job it is running, the way it would ask for the
time — no parameter in its schema, and the same code runs inline (where the checkpoint
only lives in memory):

    @tool(background=True)
    def compute(symbol: str, days: int) -> dict:
        cp = checkpoint()
        state = cp.state or {"day": 0, "total": 0}   # resume where the last attempt got to
        for day in range(state["day"], days):
            state = {"day": day + 1, "total": state["total"] + price(symbol, day)}
            cp.save(state)                           # committed: a restart continues here
        return {"total": state["total"]}

The state must be JSON. `save` also renews the job's lease; it raises `LeaseLost` when
another worker has taken the job, and the tool should then let the exception end it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ._tx import check_json
from .store import DEFAULT_LEASE_S, JobQueue


class Checkpoint:
    """The progress of one tool call; in memory only when the call is not a job.

    Attributes:
        state: the last state saved (by this attempt or an earlier one), or None.
        attempt: which attempt of the job this is (1 for the first, and inline).
        job_id: the job's id, None inline.
    """

    def __init__(self, state: Any = None, *, attempt: int = 1, job_id: str | None = None) -> None:
        self.state = state
        self.attempt = attempt
        self.job_id = job_id

    @property
    def resumed(self) -> bool:
        """True when an earlier attempt left a state to continue from."""
        return self.attempt > 1 and self.state is not None

    def save(self, state: Any) -> None:
        """Record `state` as the progress so far (blocking: call it from sync tools)."""
        self.state = check_json("checkpoint", state)

    async def asave(self, state: Any) -> None:
        """`save` for async tools (does not block the event loop)."""
        self.save(state)


class JobCheckpoint(Checkpoint):
    """A job's checkpoint: `save` commits to the store under the worker's lease."""

    def __init__(
        self,
        store: JobQueue,
        job_id: str,
        owner: str,
        *,
        state: Any,
        attempt: int,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        super().__init__(state, attempt=attempt, job_id=job_id)
        self._store = store
        self._owner = owner
        self._lease_s = lease_s
        self.saves = 0

    def save(self, state: Any) -> None:
        assert self.job_id is not None
        self._store.checkpoint_job(self.job_id, self._owner, state, lease_s=self._lease_s)
        self.state = state
        self.saves += 1

    async def asave(self, state: Any) -> None:
        await asyncio.to_thread(self.save, state)


_current: ContextVar[Checkpoint | None] = ContextVar("pi_checkpoint", default=None)


def checkpoint() -> Checkpoint:
    """The checkpoint of the job this code runs in; a fresh in-memory one outside jobs."""
    return _current.get() or Checkpoint()


@contextmanager
def checkpoint_scope(value: Checkpoint) -> Iterator[Checkpoint]:
    """Make `value` what `checkpoint()` returns inside the block (and threads it starts
    with the context copied, as `asyncio.to_thread` does)."""
    token = _current.set(value)
    try:
        yield value
    finally:
        _current.reset(token)
