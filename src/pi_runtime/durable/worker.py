"""The worker: delivers finished jobs' results, runs continuations, and runs jobs.

Each of `concurrency` slots repeats: claim an outbox event and deliver it; else claim a
queued run (a `server_result` continuation, or a run whose holder died) and run it; else
claim a job and run its tool. Delivery goes first because it is quick and unblocks a
conversation. Everything is claimed under a lease, so any number of workers on any
number of machines can share a store; a killed worker's leases expire and another
worker takes over (a job from its last checkpoint).

A slot that looks for work claims for the worker's idle slots too, in the same
transaction (`Store.claim_batch`): each claimed piece is held under the lease of the
slot that will do it, and handed to that slot at once. So a busy worker's slots share
one claim, and a slot never holds work it has not started.

`stop()` (SIGTERM) drains: no new claims, current work finishes within `drain_s`, then
what is left is cancelled and its leases released for others. A second `stop()` does
not wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..data.fields import check_json
from ..exceptions import UserError
from ..messages import redact
from ..models import Model
from ..tools import ToolSpec
from ._mcp_jobs import run_mcp_job
from ._session_agents import SessionAgents
from ._watch import Watch
from .errors import LeaseLost, StoreError
from .executor import Finish, execute_job
from .records import (
    Delivery,
    FinishedJob,
    JobEnding,
    JobRecord,
    OutboxEvent,
    RunRecord,
    TurnInputs,
)
from .results import ResultEncoder, ending_message, qrp1_result, result_message
from .sessions import request_from, run_held
from .store import DEFAULT_LEASE_S, Store

T = TypeVar("T")
Work = OutboxEvent | RunRecord | JobRecord

log = logging.getLogger("pi_runtime.durable")

_MIN_POLL_S = 0.01
_LISTEN_S = 0.2  # the longest a listener waits before checking whether to stop


@dataclass(slots=True)
class WorkerStats:
    """What a worker did, for its exit report and for tests."""

    jobs: Counter[str] = field(default_factory=Counter)  # by outcome
    deliveries: Counter[str] = field(default_factory=Counter)  # delivered / duplicate / ignored
    runs: Counter[str] = field(default_factory=Counter)  # by status, plus "lost"
    errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": dict(self.jobs),
            "deliveries": dict(self.deliveries),
            "runs": dict(self.runs),
            "errors": self.errors,
        }


class Worker:
    """Runs jobs, delivers their results and runs continuations for one store.

    Args:
        store: the shared store.
        concurrency: how many things it works on at once.
        lease_s: lease length; a dead worker's work is taken over after this long.
        poll_s: the longest pause between looks for work when idle.
        tools: tools for jobs whose session names none (or names tools that don't import
            here); a session's own recipe comes first.
        encoder: how delivered results are written for the model (QRP1 by default).
        trace_dir: where continuation runs write traces (default as `Agent`; False: none).
        run_attempts: a run interrupted this often (its worker died) fails.
        drain_s: how long `stop()` lets current work finish.
        name: the lease owner prefix (default: host and process id).
    """

    def __init__(
        self,
        store: Store,
        *,
        concurrency: int = 1,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = 0.5,
        tools: Iterable[ToolSpec] = (),
        encoder: ResultEncoder = qrp1_result,
        trace_dir: str | Path | bool | None = None,
        run_attempts: int = 3,
        drain_s: float = 20.0,
        name: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise UserError(f"concurrency must be at least 1, got {concurrency}")
        for what, value in (("lease_s", lease_s), ("poll_s", poll_s)):
            if not value > 0:
                raise UserError(f"{what} must be positive, got {value}")
        if drain_s < 0 or run_attempts < 1:
            raise UserError("drain_s must be >= 0 and run_attempts >= 1")
        self.store = store
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.extra_tools = {t.name: t for t in tools}
        self.encoder = encoder
        self.trace_dir = trace_dir
        self.run_attempts = run_attempts
        self.drain_s = drain_s
        self.name = name or f"worker-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.stats = WorkerStats()
        self._models: dict[str, Model] = {}
        self._sessions = SessionAgents(store)  # each session's agent and tools, read once
        self._halt = asyncio.Event()
        self._abort = asyncio.Event()
        self._stopping = False
        self._busy = 0
        self._generation = 0
        self._notices = 0  # "work may be claimable" notices heard so far
        self._wake = asyncio.Event()  # set (and replaced) on each notice
        # idle slots, each with where a claiming slot hands it work (or None)
        self._idle: dict[int, asyncio.Future[Work | None]] = {}

    # Lifecycle

    def stop(self) -> None:
        """Drain: claim nothing more, let current work finish (a second call: don't wait)."""
        if self._stopping:
            self._abort.set()
        self._stopping = True
        self._halt.set()

    async def run(self, *, once: bool = False) -> WorkerStats:
        """Work until `stop()`; with `once`, until no work is left that this worker can
        claim now."""
        loop = asyncio.get_running_loop()
        # Store calls go through threads: enough of them that lease renewals never queue
        # behind other slots' calls. (Sync tools run on daemon threads of their own.)
        loop.set_default_executor(ThreadPoolExecutor(max_workers=3 * self.concurrency + 4))
        log.info(
            "worker %s: serving %s with %d slot(s)", self.name, self.store.url, self.concurrency
        )
        watch = self.store.watch()
        listener = asyncio.create_task(self._listen(watch)) if watch is not None else None
        slots = [asyncio.create_task(self._slot(i, once)) for i in range(self.concurrency)]
        await self._halt.wait()
        drained = asyncio.ensure_future(asyncio.wait(slots))
        aborted = asyncio.ensure_future(self._abort.wait())
        await asyncio.wait(
            {drained, aborted}, timeout=self.drain_s, return_when=asyncio.FIRST_COMPLETED
        )
        for task in (*slots, drained, aborted):
            task.cancel()
        await asyncio.gather(*slots, drained, aborted, return_exceptions=True)
        if listener is not None and watch is not None:
            # it ends by itself within _LISTEN_S of the halt: its connection is then free
            await asyncio.gather(listener, return_exceptions=True)
            await asyncio.to_thread(watch.close)
        return self.stats

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT drain; a second one stops without waiting."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    async def _listen(self, watch: Watch) -> None:
        """Wake the idle slots on each notice (they still poll, slowly, for expired
        leases, which send none)."""
        while not self._halt.is_set():
            try:
                heard = await asyncio.to_thread(watch.wait, min(self.poll_s, _LISTEN_S))
            except StoreError as exc:
                log.warning("worker %s: %s", self.name, exc)
                await asyncio.sleep(self.poll_s)
                continue
            if heard:
                self._notices += 1
                wake, self._wake = self._wake, asyncio.Event()
                wake.set()

    async def _slot(self, index: int, once: bool) -> None:
        owner = f"{self.name}/{index}"
        delay = _MIN_POLL_S
        empty = 0  # looks in a row that found nothing
        worked = False
        # claimed for this slot by another (counted busy); at start, the first slot's
        # claim is made for all, not one claim per slot at once
        handed = await self._idle_wait(index, _MIN_POLL_S) if index else None
        await asyncio.sleep(0)  # (the others are idle by the first slot's first claim)
        while handed is not None or not self._halt.is_set():
            seen, heard = self._generation, self._notices
            if handed is None:
                self._busy += 1
            try:
                if handed is not None:
                    work, handed = handed, None
                    await self._do(work, owner)
                    worked = True
                else:
                    # busy (the last look found work): claim at once, without a look first
                    worked = await self._step(owner, look_first=not worked)
            except asyncio.CancelledError:
                raise
            except StoreError as exc:  # keep serving: a database blip must not end it
                log.warning("worker %s: %s", owner, exc)
                self.stats.errors += 1
                worked = False
            except Exception:
                log.exception("worker %s: a step failed", owner)
                self.stats.errors += 1
                worked = False
            finally:
                self._busy -= 1
            if worked:
                self._generation += 1
                delay, empty = _MIN_POLL_S, 0
                continue
            empty = empty + 1 if seen == self._generation else 1
            # A claim that finds nothing may still have settled expired work (a job ending
            # `outcome_unknown` writes its event): only a second empty look means done.
            if once and empty >= 2 and self._busy == 0:
                self._halt.set()  # nothing left, and nobody is making more
                return
            if heard != self._notices:
                continue  # told of new work while looking: look again
            handed = await self._idle_wait(index, delay)
            delay = _MIN_POLL_S if handed is not None else min(delay * 2, self.poll_s)

    async def _idle_wait(self, index: int, delay: float) -> Work | None:
        """Wait up to `delay` for a notice or a halt; return early with work that another
        slot claimed for this one (a claim that found none for it changes nothing)."""
        loop = asyncio.get_running_loop()
        deadline, heard = loop.time() + delay, self._notices
        while not self._halt.is_set() and heard == self._notices and loop.time() < deadline:
            offer: asyncio.Future[Work | None] = loop.create_future()
            self._idle[index] = offer
            halt = asyncio.ensure_future(self._halt.wait())
            wake = asyncio.ensure_future(self._wake.wait())
            waiting: set[asyncio.Future[Any]] = {halt, wake, offer}
            try:
                await asyncio.wait(
                    waiting,
                    timeout=deadline - loop.time(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            except asyncio.CancelledError:
                offer.cancel()  # taken or not, this slot will not do what it is handed
                raise
            finally:
                halt.cancel()
                wake.cancel()
                taken = self._idle.get(index) is not offer
                if not taken:
                    del self._idle[index]  # nobody will hand it anything now
            if not taken:
                return None  # the time is up, or a notice or the halt came
            # A claiming slot took this one's turn: it settles the offer as it ends, and
            # what it claimed for this slot is held under this slot's lease.
            work = await offer
            if work is not None:
                return work
        return None

    async def _step(self, owner: str, *, look_first: bool = True) -> bool:
        """Claim work for this slot and for the idle ones; do this slot's share."""
        helpers = list(self._idle.items())
        self._idle.clear()
        owners = [owner] + [f"{self.name}/{index}" for index, _ in helpers]
        claimed: list[Work] = []
        orphans: list[tuple[Work, str]] = []  # claimed for a slot a drain's end cancelled
        try:
            claimed = await asyncio.to_thread(self._claim, owners, look_first)
        finally:
            for k, (index, offer) in enumerate(helpers, start=1):
                work = claimed[k] if k < len(claimed) else None
                if offer.done():
                    if work is not None:
                        orphans.append((work, f"{self.name}/{index}"))
                    continue
                if work is not None:
                    self._busy += 1  # the helper's, from now until it has done it
                offer.set_result(work)
            if orphans:  # given back at once, as a drain gives back what it cuts short
                with contextlib.suppress(StoreError):
                    await asyncio.shield(asyncio.to_thread(self._give_back, orphans))
        if not claimed:
            return False
        await self._do(claimed[0], owner)
        return True

    async def _do(self, work: Work, owner: str) -> None:
        if isinstance(work, OutboxEvent):
            taken = await self._deliver(work, owner)
        elif isinstance(work, RunRecord):
            await self._guarded(self._run(work, owner), release=self._release_run(work, owner))
            return
        else:
            taken = await self._guarded(
                self._job(work, owner), release=self._release_job(work, owner)
            )
        if taken is not None and taken.continuation is not None:
            # the continuation the delivery queued, already ours, with what it reads
            run = taken.continuation
            await self._guarded(
                self._run(run, owner, taken.inputs), release=self._release_run(run, owner)
            )

    def _claim(self, owners: list[str], look_first: bool) -> list[Work]:
        """The next work, most urgent first (one transaction for all three looks)."""
        return self.store.claim_batch(
            owners, lease_s=self.lease_s, max_attempts=self.run_attempts, look_first=look_first
        )

    async def _guarded(self, work: Awaitable[T], *, release: Any) -> T:
        """Run `work`; if it is cancelled (a drain ran out of time), release its lease so
        another worker takes it over at once."""
        try:
            return await work
        except asyncio.CancelledError:
            with contextlib.suppress(StoreError):
                await asyncio.shield(asyncio.to_thread(release))
            raise

    def _give_back(self, orphans: list[tuple[Work, str]]) -> None:
        """Release claimed work nobody will start (an event's lease just runs out)."""
        for work, owner in orphans:
            if isinstance(work, JobRecord):
                self.store.release_job(work.id, owner)
            elif isinstance(work, RunRecord):
                self.store.release_run(work.id, owner)

    def _release_run(self, run: RunRecord, owner: str) -> Any:
        return lambda: self.store.release_run(run.id, owner)

    def _release_job(self, job: JobRecord, owner: str) -> Any:
        return lambda: self.store.release_job(job.id, owner)

    # The three kinds of work

    async def _deliver(self, event: OutboxEvent, owner: str) -> Delivery | None:
        """Deliver `event`; the continuation it queued, if any, is returned held by
        `owner` (unless draining), to be run by this slot next."""
        message = result_message(event, encoder=self.encoder)
        take = None if self._stopping else owner
        delivery = await asyncio.to_thread(
            self.store.deliver, event.id, message, owner=take, lease_s=self.lease_s
        )
        return self._delivered(delivery, event.job_id, take)

    def _delivered(self, delivery: Delivery, job_id: str, take: str | None) -> Delivery | None:
        """Count `delivery`; itself if `take` holds the continuation it queued."""
        self.stats.deliveries[delivery.outcome] += 1
        log.info(
            "event %d (job %s) → session %s call %s: %s",
            delivery.event_id, job_id, delivery.session_id, delivery.tool_call_id,
            delivery.outcome,
        )  # fmt: skip
        run = delivery.continuation
        return delivery if run is not None and take and run.lease_owner == take else None

    async def _run(self, run: RunRecord, owner: str, inputs: TurnInputs | None = None) -> None:
        """Run the held `run` (`inputs`: what it reads, if its deliverer read it)."""
        try:
            recipe = await self._sessions.recipe(run.session_id)
            if inputs is None:
                inputs = await asyncio.to_thread(self.store.turn_inputs, run)
            request = request_from(run, inputs.requested)
            # the very agent the session defines, with the limits its request was given
            agent = recipe.build_agent(
                trace_dir=self.trace_dir,
                models=self._models,
                limits=request.limits,
                memory_store=self.store,
            )
            # the agent lives for this run: its MCP servers' sessions end with it
            turn = await agent.mcp.closing(
                run_held(
                    self.store,
                    run,
                    agent=agent,
                    owner=owner,
                    lease_s=self.lease_s,
                    job_max_attempts=recipe.job_max_attempts,
                    request_elapsed_s=request.elapsed_s,
                    inputs=inputs,
                )
            )
        except LeaseLost as exc:
            log.warning("run %s: %s", run.id, exc)
            self.stats.runs["lost"] += 1
            return
        except UserError as exc:  # the agent cannot be built or run here: fail, say why
            log.error("run %s of session %s failed: %s", run.id, run.session_id, exc)
            with contextlib.suppress(LeaseLost):
                current = await asyncio.to_thread(self.store.get_run, run.id)
                if current is not None and current.status == "running":
                    await asyncio.to_thread(
                        self.store.finish_run,
                        run.id,
                        owner=owner,
                        status="failed",
                        stop_reason="internal_error",
                        result={"status": "failed", "error": redact(str(exc))},
                    )
            self.stats.runs["failed"] += 1
            return
        self.stats.runs[turn.run.status] += 1
        log.info("run %s (%s) of session %s: %s", run.id, run.kind, run.session_id, turn.run.status)

    async def _job(self, job: JobRecord, owner: str) -> Delivery | None:
        """Run `job`; its result is delivered in the same transaction that ends it when
        its call is awaited, and the continuation that queues, if ours, is returned."""
        spec = await self._tool_for(job)
        outcome = None
        if spec is None and job.session_id:  # maybe one of the session's MCP tools
            recipe = await self._sessions.recipe(job.session_id)
            outcome = await run_mcp_job(
                self.store, job, recipe, owner=owner, lease_s=self.lease_s, models=self._models
            )
        finished: list[tuple[FinishedJob, str | None]] = []
        if outcome is None:
            outcome = await execute_job(self.store, job, spec, owner=owner, lease_s=self.lease_s,
                                        finish=self._finish(job, owner, finished))  # fmt: skip
        self.stats.jobs[outcome] += 1
        log.info("job %s (%s) attempt %d: %s", job.id, job.tool, job.attempts, outcome)
        if not finished or finished[-1][0].delivery is None:
            return None
        done, take = finished[-1]
        assert done.delivery is not None
        return self._delivered(done.delivery, job.id, take)

    def _finish(
        self, job: JobRecord, owner: str, finished: list[tuple[FinishedJob, str | None]]
    ) -> Finish:
        """How this worker ends a job it ran: with the delivery of its result to the
        awaiting call, when there is one (`finish_job`), appended to `finished` with who
        took the continuation (nobody when draining)."""

        def finish(ending: JobEnding) -> JobRecord:
            message = None
            if job.session_id is not None and job.tool_call_id is not None:
                if ending.status == "succeeded":
                    check_json("job result", ending.result)  # before encoding it
                message = ending_message(job, ending, encoder=self.encoder)
            take = None if self._stopping else owner
            done = self.store.finish_job(job.id, owner, ending, message=message,
                                         take=take is not None, lease_s=self.lease_s)  # fmt: skip
            finished.append((done, take))
            return done.job

        return finish

    async def _tool_for(self, job: JobRecord) -> ToolSpec | None:
        tools = await self._sessions.tools(job.session_id) if job.session_id else None
        return (tools or {}).get(job.tool) or self.extra_tools.get(job.tool)
