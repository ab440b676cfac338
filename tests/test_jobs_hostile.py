"""Background jobs whose tools misbehave: on SQLite and PostgreSQL, with real workers.

A job's tool may return a value no encoder takes, have a validator that raises anything,
call `sys.exit()` while it runs or at import. Each job still ends once, as a tool error
the model reads, the tool runs once however often leases expire, and the worker goes on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime import ToolResultMessage, tool
from pi_runtime.durable import JobRecord, Store, executor
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker, WorkerStats
from pi_runtime.loop import run_blocking

LEASE_S = 5.0

calls: Counter[str] = Counter()


class BadStr:
    def __str__(self) -> str:
        raise ValueError("no text for this one")

    __repr__ = __str__


def _cycle() -> list[Any]:
    looped: list[Any] = [1]
    looped.append(looped)
    return looped


def _deep(depth: int) -> list[Any]:
    top: list[Any] = []
    level = top
    for _ in range(depth):
        level.append([])
        level = level[0]
    return top


def _self_keyed() -> dict[str, Any]:
    looped: dict[str, Any] = {}
    looped["me"] = looped
    return looped


RESULTS: dict[str, Any] = {
    "cycle": _cycle,
    "cyclic_dict": _self_keyed,
    "bad_str": BadStr,
    "bytes": lambda: b"\xff",
    "deep": lambda: _deep(5000),
    "exit": lambda: sys.exit(3),
    "generator_exit": lambda: (_ for _ in ()).throw(GeneratorExit),
    "surrogates": lambda: {"\ud800": "\udfff"},
    "nan": lambda: {"a": [float("nan")]},
}


@tool(background=True, idempotent=False)
def produce(what: str, idempotency_key: str) -> Any:
    """A side effect, then a value that may be hostile."""
    calls[what] += 1
    return RESULTS[what]()


@tool(background=True, idempotent=False)
async def produce_async(what: str, idempotency_key: str) -> Any:
    """`produce` as a coroutine: what it raises reaches the worker's task directly."""
    calls[what] += 1
    return RESULTS[what]()


def _refuse(value: int) -> int:
    raise RuntimeError("the validator itself broke\n(on two lines)")


@tool(background=True)
def picky(n: Annotated[int, AfterValidator(_refuse)]) -> int:
    """A tool whose own validator raises something pydantic does not wrap."""
    return n


TOOLS = [produce, produce_async, picky]


def work(store: Store) -> WorkerStats:
    """One in-process worker until nothing is left (bounded: a dead slot would hang it)."""
    worker = Worker(store, poll_s=0.01, lease_s=LEASE_S, trace_dir=False)
    return asyncio.run(asyncio.wait_for(worker.run(once=True), 20))


def session_calling(store: Store, tmp: Path, session_id: str, call: dict[str, Any]) -> None:
    """A session whose model makes `call` (a background one), then answers."""
    script = tmp / f"{session_id}.json"
    steps = [{"tool_calls": [{"id": "call_1", **call}]}, {"text": "Handled."}]
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    recipe = Recipe(model=f"scripted:{script}", tools=("test_jobs_hostile:TOOLS",))
    _, recipe = open_session(store, session_id, recipe)
    agent = recipe.build_agent(trace_dir=False)
    turn = run_blocking(run_turn(store, session_id, "go", agent=agent, owner="cli"))
    assert turn.result.status == "awaiting"


def only_job(store: Store, session_id: str) -> JobRecord:
    (job,) = store.list_jobs(session_id)
    return job


def answer(store: Store, session_id: str) -> ToolResultMessage:
    (message,) = [
        m.message
        for m in store.load_messages(session_id)
        if isinstance(m.message, ToolResultMessage)
    ]
    return message


def ended_once(store: Store, clock: FakeClock, session_id: str) -> JobRecord:
    """The job of `session_id`, ended in one attempt, after a worker is done and another
    came once every lease the first could have left had expired; the session completed."""
    work(store)
    clock.advance(LEASE_S * 3)
    work(store)
    job = only_job(store, session_id)
    assert job.attempts == 1
    session = store.get_session(session_id)
    assert session is not None and session.status == "completed"
    return job


@pytest.mark.parametrize("what", ["cycle", "cyclic_dict", "bad_str", "bytes", "deep"])
def test_a_result_that_cannot_be_encoded_fails_the_job_once_and_the_model_hears_why(
    store: Store, clock: FakeClock, tmp_path: Path, what: str
) -> None:
    calls.clear()
    call = {"name": "produce", "arguments": {"what": what}}
    session_calling(store, tmp_path, "hostile", call)
    job = ended_once(store, clock, "hostile")
    assert calls[what] == 1
    assert job.status == "failed" and job.error is not None
    assert job.error["kind"] == "tool_error"
    assert job.error["message"].startswith("the tool's result could not be encoded: ")
    delivered = answer(store, "hostile")
    assert delivered.is_error and json.loads(delivered.content)["kind"] == "tool_error"


@pytest.mark.parametrize(
    ("what", "reads"),
    [("nan", {"a": ["NaN"]}), ("surrogates", {"\ufffd": "\ufffd"})],
)
def test_a_result_is_made_safe_as_an_inline_one_is(
    store: Store, clock: FakeClock, tmp_path: Path, what: str, reads: Any
) -> None:
    calls.clear()
    session_calling(store, tmp_path, "odd", {"name": "produce", "arguments": {"what": what}})
    job = ended_once(store, clock, "odd")
    assert calls[what] == 1
    assert (job.status, job.result) == ("succeeded", reads)
    assert not answer(store, "odd").is_error


@pytest.mark.parametrize("name", ["produce", "produce_async"])
@pytest.mark.parametrize("what", ["exit", "generator_exit"])
def test_a_tool_that_exits_fails_its_job_once_and_the_worker_goes_on(
    store: Store, clock: FakeClock, tmp_path: Path, name: str, what: str
) -> None:
    calls.clear()
    session_calling(store, tmp_path, "exits", {"name": name, "arguments": {"what": what}})
    job = ended_once(store, clock, "exits")
    assert calls[what] == 1
    assert job.status == "failed" and job.error is not None
    assert job.error["kind"] == "tool_error" and "Exit" in job.error["message"]
    assert answer(store, "exits").is_error


@pytest.mark.parametrize("exit", [SystemExit(2), GeneratorExit()])
def test_an_exit_that_execute_lets_through_still_ends_the_job_once(
    store: Store,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    exit: BaseException,
) -> None:
    ran: list[str] = []

    async def leaky(spec: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append(spec.name)
        raise exit

    monkeypatch.setattr(executor, "execute", leaky)
    session_calling(store, tmp_path, "leak", {"name": "produce", "arguments": {"what": "nan"}})
    job = ended_once(store, clock, "leak")
    assert ran == ["produce"]
    assert job.status == "failed" and job.error is not None
    assert job.error["kind"] == "tool_error" and type(exit).__name__ in job.error["message"]
    assert answer(store, "leak").is_error


def enqueued_call(
    store: Store, tmp: Path, session_id: str, tool: str, arguments: dict[str, Any]
) -> str:
    """A session awaiting a job whose arguments no gate checked (written as they are)."""
    script = tmp / f"{session_id}.json"
    script.write_text(json.dumps({"steps": [{"text": "Handled."}]}), encoding="utf-8")
    recipe = Recipe(model=f"scripted:{script}", tools=("test_jobs_hostile:TOOLS",))
    store.create_session(session_id, agent=recipe.to_dict())
    run = store.create_run(session_id, owner="cli")
    job = store.enqueue_job(tool, arguments, session_id=session_id, tool_call_id="c1")
    store.finish_run(run.id, owner="cli", status="awaiting", stop_reason="awaiting_tool",
                     waits=[("c1", job.id)])  # fmt: skip
    return job.id


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"n": 1}, "Arguments were rejected: RuntimeError: the validator itself broke (on two"),
        ({"n": "one"}, "Arguments were rejected: $.n: Input should be a valid integer"),
    ],
)
def test_arguments_a_tool_refuses_in_any_way_end_its_job_as_invalid_arguments_in_one_line(
    store: Store, tmp_path: Path, arguments: dict[str, Any], says: str
) -> None:
    job_id = enqueued_call(store, tmp_path, "picky", "picky", arguments)
    stats = work(store)
    assert stats.errors == 0 and dict(stats.runs) == {"completed": 1}
    job = store.get_job(job_id)
    assert job is not None and job.status == "failed" and job.error is not None
    assert job.error["kind"] == "invalid_arguments"
    message = job.error["message"]
    assert message.startswith(says) and "\n" not in message and "http" not in message
    assert answer(store, "picky").is_error


EXITING = "import sys\n\nsys.exit(4)\n"


def test_a_tool_module_that_exits_at_import_is_a_tool_not_loadable_here(
    store: Store, tmp_path: Path
) -> None:
    module = f"exiting_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(EXITING, encoding="utf-8")
    recipe = Recipe(tools=(f"{module}:TOOLS",), import_path=str(tmp_path))
    store.create_session("gone", agent=recipe.to_dict())
    run = store.create_run("gone", owner="cli")
    job = store.enqueue_job("produce", {"what": "?"}, session_id="gone", tool_call_id="c1")
    store.finish_run(run.id, owner="cli", status="awaiting", stop_reason="awaiting_tool",
                     waits=[("c1", job.id)])  # fmt: skip
    stats = work(store)  # the job, then the run continuing after its result: both import it
    assert dict(stats.jobs) == {"failed": 1} and dict(stats.runs) == {"failed": 1}
    failed = store.get_job(job.id)
    assert failed is not None and failed.error is not None
    assert failed.error["kind"] == "unknown_tool"
    assert answer(store, "gone").is_error
