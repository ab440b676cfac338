"""Workers that die or are told to stop (seed 004): on SQLite and PostgreSQL, with real
`pi worker` processes on a loopback database.

- killed at random moments while 200+ jobs run: every tool call still gets exactly one
  result, every session completes, no run is continued twice;
- a killed job resumes from its last checkpoint and ends with the one-shot result;
- SIGTERM lets the current job finish; past the drain timeout it hands the job over.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from pi_runtime.durable import JobRecord, Store, open_store
from pi_runtime.durable.executor import execute_job
from pi_runtime.durable.recipe import Recipe, import_tools
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker
from pi_runtime.loop import run_blocking
from pi_runtime.qrp1 import decode

# These suites start worker processes and kill them on a schedule: under pytest-xdist one
# worker runs them in turn, so two never starve each other of the two cores.
pytestmark = pytest.mark.xdist_group("worker-faults")

PI = Path(sys.executable).parent / "pi"
REPO = Path(__file__).resolve().parents[1]
SEGMENTS = 5

FAULT_TOOLS = f'''\
"""A retry-safe background tool that checkpoints after every segment."""

import time

from pi_runtime import tool
from pi_runtime.durable.progress import checkpoint


@tool(background=True, timeout_s=60)
def crunch(n: int) -> dict:
    """Sum a few slow segments."""
    progress = checkpoint()
    state = progress.state or {{"i": 0, "acc": 0}}
    while state["i"] < {SEGMENTS}:
        time.sleep(0.02)
        i = state["i"]
        state = {{"i": i + 1, "acc": state["acc"] + (n * 31 + i) ** 2 % 1009}}
        progress.save(state)
    return {{"n": n, "acc": state["acc"]}}


TOOLS = [crunch]
'''


def crunched(n: int) -> dict[str, int]:
    return {"n": n, "acc": sum((n * 31 + i) ** 2 % 1009 for i in range(SEGMENTS))}


def script_for(k: int) -> dict[str, Any]:
    """Two background calls, then one more after their results, then the answer."""
    call = lambda n: {"name": "crunch", "arguments": {"n": n}}  # noqa: E731
    return {
        "steps": [
            {"tool_calls": [call(3 * k), call(3 * k + 1)]},
            {"tool_calls": [call(3 * k + 2)]},
            {"text": f"session {k} done"},
        ]
    }


def worker_process(db_url: str, cwd: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PI_TRACE_DIR": str(cwd / "traces")}
    with log.open("ab") as sink:
        return subprocess.Popen(
            [str(PI), "worker", "--db", db_url, *extra],
            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip


def start_sessions(store: Store, tmp: Path, count: int) -> list[str]:
    # a module name of its own: each parametrised case writes its own copy, and one
    # process must not import two modules of one name from two folders
    module = f"faulttools_{tmp.name.replace('-', '_')}"
    (tmp / f"{module}.py").write_text(FAULT_TOOLS, encoding="utf-8")
    ids = []
    for k in range(count):
        script = tmp / f"script-{k}.json"
        script.write_text(json.dumps(script_for(k)), encoding="utf-8")
        recipe = Recipe(
            model=f"scripted:{script}",
            tools=(f"{module}:TOOLS",),
            import_path=str(tmp),
            job_max_attempts=50,
        )
        session, _ = open_session(store, f"s{k}", recipe)
        agent = recipe.build_agent(trace_dir=False)
        turn = run_blocking(run_turn(store, session.id, "go", agent=agent, owner="client"))
        assert turn.result.status == "awaiting"
        ids.append(session.id)
    return ids


def unfinished(store: Store, ids: list[str]) -> list[str]:
    return [s for s in ids if store.get_session(s).status != "completed"]  # type: ignore[union-attr]


@pytest.mark.slow
def test_killed_workers_lose_nothing_and_deliver_everything_once(
    db_url: str, tmp_path: Path
) -> None:
    store = open_store(db_url)
    sessions = start_sessions(store, tmp_path, 70)  # 210 jobs, 140 continuations
    log = tmp_path / "workers.log"
    options = ("--concurrency", "2", "--lease", "1.5", "--poll", "0.05", "--run-attempts", "50")
    workers = [worker_process(db_url, tmp_path, log, *options) for _ in range(3)]
    rng = random.Random(2024)
    kills = 0
    deadline = time.monotonic() + 150
    pending = sessions
    try:
        while pending and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.5, 1.2))
            victim = rng.randrange(len(workers))
            workers[victim].send_signal(signal.SIGKILL)  # mid-claim, mid-job, mid-delivery
            workers[victim].wait()
            workers[victim] = worker_process(db_url, tmp_path, log, *options)
            kills += 1
            pending = unfinished(store, pending)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=60)
    assert kills >= 5
    assert unfinished(store, sessions) == [], log.read_text()[-3000:]

    jobs = 0
    for session_id in sessions:
        messages = [m.message for m in store.load_messages(session_id)]
        calls = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
        answers = [m for m in messages if isinstance(m, ToolResultMessage)]
        counts = Counter(a.tool_call_id for a in answers)
        assert counts == Counter(c.id for c in calls)  # every call: exactly one result
        by_call = {a.tool_call_id: a for a in answers}  # in the order the jobs finished
        for call in calls:
            answer = by_call[call.id]
            assert not answer.is_error and decode(answer.content) == crunched(call.arguments["n"])
        runs = store.list_runs(session_id)
        assert [(r.kind, r.status) for r in runs] == [
            ("user", "awaiting"), ("server_result", "awaiting"), ("server_result", "completed"),
        ]  # fmt: skip
        parents = [r.parent_run_id for r in runs[1:]]
        assert parents == [runs[0].id, runs[1].id]  # each run continued once, in order
        assert [m.role for m in messages].count("assistant") == 3  # no turn ran twice
        jobs += len(calls)
    assert jobs >= 200
    store.close()


@pytest.mark.slow
def test_a_killed_job_resumes_from_its_checkpoint_with_the_one_shot_result(
    db_url: str, tmp_path: Path
) -> None:
    store = open_store(db_url)
    job = examples_job(store, {"symbol": "ACME", "days": 240, "pause_ms": 120})
    log = tmp_path / "first.log"
    first = worker_process(db_url, REPO, log, "--lease", "1")
    try:
        progress = wait_for(store, job.id, lambda j: (j.checkpoint or {}).get("day", 0) >= 60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    saved = store.get_job(job.id)
    assert saved is not None and saved.status == "running" and saved.checkpoint["day"] < 240
    assert progress.attempts == 1
    wait_for(store, job.id, lambda j: j.lease_expires_at < datetime.now(UTC))

    second = subprocess.run(
        [str(PI), "worker", "--once", "-v", "--db", db_url, "--lease", "5"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PI_TRACE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert f"job {job.id} attempt 2 resumes from its checkpoint" in second.stderr
    done = store.get_job(job.id)
    assert done is not None and (done.status, done.attempts) == ("succeeded", 2)
    compute = {t.name: t for t in import_tools("examples.jobs.tools:TOOLS", str(REPO))}["compute"]
    assert done.result == compute.function(symbol="ACME", days=240)  # one shot, inline
    store.close()


def examples_job(store: Store, arguments: dict[str, Any]) -> JobRecord:
    """An awaited `compute` job of a session whose agent is the examples' market agent."""
    recipe = Recipe(
        model=f"scripted:{REPO / 'examples' / 'jobs' / 'script.json'}",
        tools=("examples.jobs.tools:TOOLS",),
        import_path=str(REPO),
    )
    session, _ = open_session(store, "market", recipe)
    run = store.create_run(session.id, owner="client")
    job = store.enqueue_job("compute", arguments, session_id=session.id, tool_call_id="c1")
    call = ToolCall(id="c1", name="compute", raw=json.dumps(arguments), arguments=arguments)
    asked = [UserMessage(content="crossings?"), AssistantMessage(content=(call,))]
    store.finish_run(run.id, owner="client", status="awaiting", stop_reason="awaiting_tool",
                     messages=asked, waits=[("c1", job.id)])  # fmt: skip
    return job


def wait_for(store: Store, job_id: str, ready: Any, timeout_s: float = 60) -> JobRecord:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = store.get_job(job_id)
        if job is not None and job.status == "running" and ready(job):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never got there: {store.get_job(job_id)}")


def test_sigterm_lets_the_current_job_finish_then_exits(db_url: str, tmp_path: Path) -> None:
    store = open_store(db_url)
    job = examples_job(store, {"symbol": "ACME", "days": 120, "pause_ms": 100})
    worker = worker_process(db_url, REPO, tmp_path / "w.log", "--drain-timeout", "60")
    wait_for(store, job.id, lambda j: j.checkpoint is not None)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    done = store.get_job(job.id)
    assert done is not None and done.status == "succeeded" and done.attempts == 1
    # draining, it delivered the result with the job's ending but ran nothing more: the
    # continuation is queued for the next worker
    assert store.get_session("market").status == "queued"  # type: ignore[union-attr]
    (continuation,) = [r for r in store.list_runs("market") if r.kind == "server_result"]
    assert continuation.status == "queued" and continuation.lease_owner is None
    answers = [m.message for m in store.load_messages("market")]
    assert [m.tool_call_id for m in answers if isinstance(m, ToolResultMessage)] == ["c1"]
    assert "SIGTERM drains" in (tmp_path / "w.log").read_text()
    store.close()


def test_sigterm_past_the_drain_timeout_hands_the_job_to_another_worker(
    db_url: str, tmp_path: Path
) -> None:
    store = open_store(db_url)
    job = examples_job(store, {"symbol": "ACME", "days": 240, "pause_ms": 400})
    worker = worker_process(db_url, REPO, tmp_path / "w.log", "--drain-timeout", "0.2")
    wait_for(store, job.id, lambda j: j.checkpoint is not None)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    left = store.get_job(job.id)
    assert left is not None and left.status == "running" and left.checkpoint["day"] < 240
    assert left.lease_expires_at is not None and left.lease_expires_at <= datetime.now(UTC)
    # released, not abandoned: another worker takes it at once and finishes it
    other = Worker(store, poll_s=0.01, trace_dir=False)
    stats = asyncio.run(other.run(once=True))
    assert dict(stats.jobs) == {"succeeded": 1} and dict(stats.runs) == {"completed": 1}
    assert store.get_job(job.id).attempts == 2  # type: ignore[union-attr]
    store.close()


class Crash(BaseException):
    """The worker process dying mid-job (nothing of the attempt runs after it)."""


def test_a_resumed_job_starts_at_its_checkpoint_and_ends_as_one_shot(
    store: Store, clock: FakeClock
) -> None:
    from pi_runtime import tool
    from pi_runtime.durable.progress import checkpoint

    computed: list[int] = []

    @tool(background=True)
    def squares(n: int, crash_at: int) -> int:
        """Sum of squares below n, one number per checkpoint."""
        progress = checkpoint()
        state = progress.state or {"i": 0, "total": 0}
        while state["i"] < n:
            if progress.attempt == 1 and state["i"] == crash_at:
                raise Crash
            computed.append(state["i"])
            state = {"i": state["i"] + 1, "total": state["total"] + state["i"] ** 2}
            progress.save(state)
        return int(state["total"])

    enqueued = store.enqueue_job("squares", {"n": 10, "crash_at": 4})
    claimed = store.claim_job("doomed", lease_s=0.5)
    assert claimed is not None
    with pytest.raises(Crash):
        asyncio.run(execute_job(store, claimed, squares, owner="doomed", lease_s=0.5))
    assert store.get_job(enqueued.id).checkpoint == {"i": 4, "total": 14}  # type: ignore[union-attr]

    computed.clear()
    clock.advance(1)  # the dead attempt's lease runs out
    worker = Worker(store, poll_s=0.01, trace_dir=False, tools=[squares])
    asyncio.run(worker.run(once=True))
    done = store.get_job(enqueued.id)
    assert done is not None and (done.status, done.attempts) == ("succeeded", 2)
    assert done.result == sum(i * i for i in range(10))  # as one uninterrupted run
    assert computed == [4, 5, 6, 7, 8, 9]  # the second attempt did only what was left
