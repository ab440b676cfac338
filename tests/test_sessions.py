"""Persistent sessions and async tool delivery end to end (seed 004), on SQLite and on
PostgreSQL: `pi run --session`, `pi worker`, `pi session show|cancel`, and the races the
seed names — a cancelled wait, a job done before its wait, an unconfirmable side effect.

CLI cases drive the command line in-process (the worker of the end-to-end case runs as
the real console script, in a process of its own); in-process cases use the same `Worker` class
with the test's fake clock, so lease expiry needs no sleeping.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi as cli_pi
from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import FakeClock
from pi_runtime import ToolResultMessage, UnrecoverableError, UserError, tool
from pi_runtime.durable import LeaseLost, Store
from pi_runtime.durable._session_agents import SessionAgents
from pi_runtime.durable.recipe import Recipe, stored_recipe
from pi_runtime.durable.records import requested_runs
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker
from pi_runtime.loop import run_blocking

REPO = Path(__file__).resolve().parents[1]
JOBS_SCRIPT = REPO / "examples" / "jobs" / "script.json"
JOBS_TOOLS = "examples.jobs.tools:TOOLS"

CHAT = {"steps": [{"text": "Hello! What shall we analyse?"}, {"text": "ACME it is."}]}
# One background call, then the answer once its result is in.
ONE_JOB = {
    "steps": [
        {"tool_calls": [{"name": "place_order", "arguments": {"symbol": "ACME", "qty": 5}}]},
        {"text": "Order handled."},
    ]
}

placed: list[tuple[str, int, str | None]] = []


@tool(background=True, idempotent=False)
def place_order(symbol: str, qty: int, idempotency_key: str) -> dict[str, Any]:
    """Place an order: a side effect that must not happen twice."""
    placed.append((symbol, qty, idempotency_key))
    return {"order": f"{symbol}x{qty}", "status": "filled"}


@tool
def halt_trading(reason: str) -> str:
    """Stop everything (an unrecoverable failure)."""
    raise UnrecoverableError(f"trading halted: {reason}")


TRADING = [place_order]
HALTING = [place_order, halt_trading]


pi = partial(cli_pi, cwd=REPO)


def show(db_url: str, session_id: str, tmp: Path) -> dict[str, Any]:
    done = pi("session", "show", session_id, "--db", db_url, "--json", tmp=tmp)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def write(tmp: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def in_session(store: Store, session_id: str, script: Path, tools: str) -> Recipe:
    _, recipe = open_session(store, session_id, Recipe(model=f"scripted:{script}", tools=(tools,)))
    return recipe


def one_order_session(store: Store, session_id: str, tmp: Path) -> Recipe:
    """A session whose model places one order (a background job) with the TRADING tools."""
    return in_session(store, session_id, write(tmp, "one.json", ONE_JOB), "test_sessions:TRADING")


def start_turn(store: Store, session_id: str, recipe: Recipe, prompt: str) -> Any:
    agent = recipe.build_agent(trace_dir=False)
    return run_blocking(run_turn(store, session_id, prompt, agent=agent, owner="cli"))


def work(store: Store, **options: Any) -> Any:
    """One in-process worker, until nothing is left to claim."""
    worker = Worker(store, poll_s=0.01, trace_dir=False, **options)
    return asyncio.run(worker.run(once=True))


def results(store: Store, session_id: str) -> list[ToolResultMessage]:
    return [
        m.message
        for m in store.load_messages(session_id)
        if isinstance(m.message, ToolResultMessage)
    ]


# Through the command line


def test_run_with_session_twice_continues_the_conversation(db_url: str, tmp_path: Path) -> None:
    script = write(tmp_path, "chat.json", CHAT)
    base = ["--session", "chat-1", "--db", db_url, "--model", f"scripted:{script}", "--json"]
    first = pi("run", "hi", *base, tmp=tmp_path)
    assert first.returncode == 0, first.stderr
    second = pi("run", "let's do ACME", *base, tmp=tmp_path)
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    # the second run saw the first turn: it answered with the script's second step
    assert result["output"] == "ACME it is."
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "user", "assistant"]
    view = show(db_url, "chat-1", tmp_path)
    assert view["status"] == "completed"
    assert [(m["seq"], m["role"]) for m in view["messages"]] == [
        (0, "user"), (1, "assistant"), (2, "user"), (3, "assistant"),
    ]  # fmt: skip
    assert [(r["kind"], r["status"]) for r in view["runs"]] == [
        ("user", "completed"), ("user", "completed"),
    ]  # fmt: skip
    assert view["runs"][1]["output"] == "ACME it is."


def test_background_tool_awaits_then_a_worker_delivers_and_the_session_completes(
    db_url: str, tmp_path: Path
) -> None:
    ran = pi(
        "run", "ACME crossings", "--session", "market", "--db", db_url,
        "--model", f"scripted:{JOBS_SCRIPT}", "--tools", JOBS_TOOLS, "--json", tmp=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    awaiting = json.loads(ran.stdout)
    assert (awaiting["status"], awaiting["stop_reason"]) == ("awaiting", "awaiting_tool")
    ((call_id, job_id),) = [(w["tool_call_id"], w["job_id"]) for w in awaiting["waits"]]
    view = show(db_url, "market", tmp_path)
    assert view["status"] == "awaiting_server_tool"
    assert [(w["tool_call_id"], w["job_id"], w["status"]) for w in view["waits"]] == [
        (call_id, job_id, "pending")
    ]
    assert call_id not in {m.get("tool_call_id") for m in view["messages"]}

    # the worker in a process of its own, as deployed
    worked = pi("worker", "--once", "--db", db_url, "--json", tmp=tmp_path, process=True, expect=0)
    stats = json.loads(worked.stdout)
    assert (stats["jobs"], stats["deliveries"], stats["runs"]) == (
        {"succeeded": 1}, {"delivered": 1}, {"completed": 1},
    )  # fmt: skip

    view = show(db_url, "market", tmp_path)
    assert view["status"] == "completed"
    delivered = [m for m in view["messages"] if m.get("tool_call_id") == call_id]
    assert len(delivered) == 1 and delivered[0]["content"].startswith("QRP1|record|source=compute")
    assert "golden_crosses=" in delivered[0]["content"]
    assert view["messages"][-1]["role"] == "assistant"
    user, after = view["runs"]
    assert (user["kind"], user["status"]) == ("user", "awaiting")
    assert (after["kind"], after["status"], after["parent_run_id"]) == (
        "server_result", "completed", user["run_id"],
    )  # fmt: skip
    assert [(j["job_id"], j["status"], j["attempts"]) for j in view["jobs"]] == [
        (job_id, "succeeded", 1)
    ]


def test_an_awaiting_session_refuses_a_new_prompt_and_says_what_to_do(
    db_url: str, tmp_path: Path
) -> None:
    args = ["--session", "busy", "--db", db_url, "--model", f"scripted:{JOBS_SCRIPT}",
            "--tools", JOBS_TOOLS]  # fmt: skip
    assert pi("run", "go", *args, tmp=tmp_path).returncode == 3
    again = pi("run", "and now?", *args, tmp=tmp_path)
    assert again.returncode == 2
    assert "awaiting_server_tool" in again.stderr and "pi worker" in again.stderr


def test_cancel_stops_the_wait_and_a_late_result_is_ignored(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    recipe = one_order_session(store, "late", tmp_path)
    turn = start_turn(store, "late", recipe, "buy 5 ACME")
    ((call_id, job_id),) = turn.result.waits
    job = store.claim_job("slow-worker")  # a worker is running it when the user cancels
    assert job is not None and job.id == job_id

    cancelled = pi("session", "cancel", "late", "--db", db_url, "--json", tmp=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["waits_cancelled"] == [call_id]
    before = store.load_messages("late")
    with pytest.raises(LeaseLost):  # the cancel ended the job: its worker writes nothing
        store.complete_job(job_id, "slow-worker", {"status": "filled"})

    stats = work(store)
    assert dict(stats.deliveries) == {"ignored": 1} and not stats.runs
    assert store.load_messages("late") == before  # nothing was delivered after the cancel
    (answer,) = results(store, "late")
    assert answer.tool_call_id == call_id and answer.is_error
    assert answer.error is not None and answer.error.kind == "cancelled"
    assert [r.kind for r in store.list_runs("late")] == ["user"]
    assert store.get_session("late").status == "cancelled"  # type: ignore[union-attr]


def test_cancel_before_a_worker_starts_the_job_means_it_never_runs(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    recipe = one_order_session(store, "early", tmp_path)
    ((_, job_id),) = start_turn(store, "early", recipe, "buy 5 ACME").result.waits
    cancelled = pi("session", "cancel", "early", "--db", db_url, "--json", tmp=tmp_path)
    assert json.loads(cancelled.stdout)["jobs_cancelled"] == [job_id]
    placed.clear()
    stats = work(store)
    assert placed == [] and not stats.jobs and not stats.runs
    assert store.get_job(job_id).status == "cancelled"  # type: ignore[union-attr]


# In process, with the fake clock


class FinishesJobsFirst:
    """A store on which a fast worker finishes every job before the run that started it
    registers its wait (the race of seed 004)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def finish_run(self, run_id: str, **options: Any) -> Any:
        for _, job_id in options.get("waits", ()):
            job = self._store.claim_job("fast-worker")
            assert job is not None and job.id == job_id
            self._store.complete_job(job_id, "fast-worker", {"order": "ACMEx5"})
        return self._store.finish_run(run_id, **options)


def test_a_job_finished_before_its_wait_was_registered_is_still_delivered(
    store: Store, tmp_path: Path
) -> None:
    recipe = one_order_session(store, "race", tmp_path)
    racing: Any = FinishesJobsFirst(store)
    turn = start_turn(racing, "race", recipe, "buy 5 ACME")
    assert turn.result.status == "awaiting" and turn.continuation is None
    ((call_id, job_id),) = turn.result.waits
    (wait,) = store.list_waits("race")
    job = store.get_job(job_id)
    assert job is not None and job.finished_at is not None and job.finished_at < wait.created_at

    stats = work(store)
    assert dict(stats.deliveries) == {"delivered": 1} and dict(stats.runs) == {"completed": 1}
    (answer,) = results(store, "race")
    assert answer.tool_call_id == call_id and "ACMEx5" in answer.content
    assert store.get_session("race").status == "completed"  # type: ignore[union-attr]


def test_an_unconfirmable_side_effect_ends_outcome_unknown_and_is_never_retried(
    store: Store, clock: FakeClock, tmp_path: Path
) -> None:
    recipe = one_order_session(store, "order", tmp_path)
    ((call_id, job_id),) = start_turn(store, "order", recipe, "buy 5 ACME").result.waits
    assert store.claim_job("doomed-worker", lease_s=10) is not None  # ... which then dies
    clock.advance(11)  # its lease runs out

    placed.clear()
    stats = work(store)
    assert placed == []  # the order was not placed a second time
    assert store.get_job(job_id).status == "outcome_unknown"  # type: ignore[union-attr]
    (answer,) = results(store, "order")
    assert answer.tool_call_id == call_id and answer.is_error
    assert answer.error is not None and answer.error.kind == "outcome_unknown"
    assert "cannot be confirmed" in answer.error.message
    assert dict(stats.runs) == {"completed": 1}  # the model hears it and the session goes on
    assert store.get_session("order").status == "completed"  # type: ignore[union-attr]


class CancelledBeforeLaunch:
    """A store on which the user cancels the session just as the run launches a job."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def enqueue_job(self, tool: str, arguments: Any, **options: Any) -> Any:
        self._store.cancel_session(options["session_id"])
        return self._store.enqueue_job(tool, arguments, **options)


def test_a_run_cancelled_mid_way_starts_no_job_and_stores_what_it_did(
    store: Store, tmp_path: Path
) -> None:
    recipe = one_order_session(store, "stop", tmp_path)
    cancelling: Any = CancelledBeforeLaunch(store)
    agent = recipe.build_agent(trace_dir=tmp_path / "traces")  # what it did is read back
    turn = run_blocking(run_turn(cancelling, "stop", "buy 5 ACME", agent=agent, owner="cli"))
    assert (turn.result.status, turn.result.stop_reason) == ("stopped", "cancelled")
    assert store.list_jobs("stop") == []  # no order will be placed for a cancelled session
    stored = [m.message for m in store.load_messages("stop")]
    assert [m.role for m in stored] == ["user", "assistant", "tool"]  # the call, answered
    answer = stored[-1]
    assert isinstance(answer, ToolResultMessage) and answer.is_error
    assert answer.error is not None and answer.error.kind == "cancelled"
    assert [(r.status, r.stop_reason) for r in store.list_runs("stop")] == [
        ("stopped", "cancelled")
    ]


def test_a_run_that_fails_beside_a_background_call_stores_a_well_formed_conversation(
    store: Store, tmp_path: Path
) -> None:
    both = {"name": "halt_trading", "arguments": {"reason": "circuit breaker"}}
    script = {"steps": [{"tool_calls": [ONE_JOB["steps"][0]["tool_calls"][0], both]}]}
    recipe = in_session(
        store, "halted", write(tmp_path, "halt.json", script), "test_sessions:HALTING"
    )
    turn = start_turn(store, "halted", recipe, "buy 5 ACME")
    assert (turn.result.status, turn.result.stop_reason) == ("failed", "tool_error")
    answers = {m.name: m for m in results(store, "halted")}
    assert set(answers) == {"place_order", "halt_trading"}  # every call has its answer
    assert answers["place_order"].error is not None
    assert answers["place_order"].error.kind == "cancelled"
    assert store.list_waits("halted") == []  # nothing will be delivered to it
    (job,) = store.list_jobs("halted")
    assert job.status == "cancelled"  # so no worker runs it for nobody
    assert store.get_session("halted").status == "failed"  # type: ignore[union-attr]


def test_a_non_idempotent_job_gets_the_idempotency_key_of_its_call(
    store: Store, tmp_path: Path
) -> None:
    from pi_runtime.tools import idempotency_key

    recipe = one_order_session(store, "keyed", tmp_path)
    ((call_id, _),) = start_turn(store, "keyed", recipe, "buy").result.waits
    placed.clear()
    work(store)
    key = idempotency_key("keyed", call_id)
    assert placed == [("ACME", 5, key)]


def record_calls(
    monkeypatch: pytest.MonkeyPatch, store: Store, method: str
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each later call of `store.<method>` as (arguments, keywords), passed through."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    original = getattr(store, method)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(store, method, recorded)
    return calls


def test_a_worker_reads_a_sessions_agent_once_for_its_job_and_the_run_after_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session keeps the agent it was created with: the job (its tools) and the
    # continuation (its agent) need not read the session twice.
    recipe = one_order_session(store, "once", tmp_path)
    start_turn(store, "once", recipe, "buy 5 ACME")
    reads = record_calls(monkeypatch, store, "get_session")
    stats = work(store)

    assert [args for args, _ in reads].count(("once",)) == 1
    assert (dict(stats.jobs), dict(stats.runs)) == ({"succeeded": 1}, {"completed": 1})
    assert store.get_session("once").status == "completed"  # type: ignore[union-attr]


def test_a_continuation_reads_its_session_in_the_transaction_that_delivers_to_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # messages, the runs its request came through and the decisions it starts from: read
    # with the delivery that queued the continuation for this worker, not in a transaction
    # of its own (a job went from 9 transactions to 7, then 6)
    recipe = one_order_session(store, "one-read", tmp_path)
    start_turn(store, "one-read", recipe, "buy 5 ACME")
    reads = {
        name: record_calls(monkeypatch, store, name)
        for name in ("turn_inputs", "load_messages", "list_approvals", "get_run")
    }
    finished = []
    original = store.finish_job

    def finish_job(*args: Any, **kwargs: Any) -> Any:
        finished.append(original(*args, **kwargs))
        return finished[-1]

    monkeypatch.setattr(store, "finish_job", finish_job)
    stats = work(store)

    assert (dict(stats.jobs), dict(stats.runs)) == ({"succeeded": 1}, {"completed": 1})
    assert {name: len(calls) for name, calls in reads.items()} == {
        "turn_inputs": 0, "load_messages": 0, "list_approvals": 0, "get_run": 0
    }  # fmt: skip
    (done,) = finished
    run, inputs = done.delivery.continuation, done.delivery.inputs
    assert run.kind == "server_result" and run.lease_owner is not None
    assert inputs is not None
    assert [r.kind for r in inputs.requested] == ["user"]
    assert inputs.approvals == []
    # the conversation as the continuation found it: up to the delivered result
    assert [m.message.role for m in inputs.messages] == ["user", "assistant", "tool"]
    assert inputs.messages == store.load_messages("one-read")[:3]


def test_a_delivery_reads_the_continuations_inputs_only_for_its_taker(
    store: Store, tmp_path: Path
) -> None:
    recipe = one_order_session(store, "taker", tmp_path)
    start_turn(store, "taker", recipe, "buy 5 ACME")
    job = store.claim_job("w", lease_s=30)
    assert job is not None
    store.complete_job(job.id, "w", {"order": "ACMEx5"})  # delivered through the outbox
    event = store.claim_outbox_event("w", lease_s=30)
    assert event is not None
    answer = ToolResultMessage(tool_call_id=job.tool_call_id or "", name=job.tool, content="ok")

    delivery = store.deliver(event.id, answer, owner="w", lease_s=30)

    assert delivery.continuation is not None and delivery.inputs is not None
    assert delivery.inputs == store.turn_inputs(delivery.continuation)
    other = one_order_session(store, "queued", tmp_path)
    start_turn(store, "queued", other, "buy 5 ACME")
    job = store.claim_job("w", lease_s=30)
    assert job is not None
    store.complete_job(job.id, "w", {"order": "ACMEx5"})
    event = store.claim_outbox_event("w", lease_s=30)
    assert event is not None
    answer = ToolResultMessage(tool_call_id=job.tool_call_id or "", name=job.tool, content="ok")
    queued = store.deliver(event.id, answer)  # nobody takes the continuation: no read
    assert queued.continuation is not None and queued.continuation.status == "queued"
    assert queued.inputs is None


def test_results_can_be_delivered_as_plain_json_text(store: Store, tmp_path: Path) -> None:
    from pi_runtime.durable.results import json_result

    recipe = one_order_session(store, "plain", tmp_path)
    start_turn(store, "plain", recipe, "buy")
    work(store, encoder=json_result)
    (answer,) = results(store, "plain")
    assert json.loads(answer.content) == {"order": "ACMEx5", "status": "filled"}


def test_a_job_whose_tool_cannot_be_loaded_fails_and_the_model_hears_why(
    store: Store, tmp_path: Path
) -> None:
    recipe = one_order_session(store, "gone", tmp_path)
    start_turn(store, "gone", recipe, "buy")
    # a worker for another application: the session's tools are not importable there
    other = store.create_session("other", agent=Recipe(tools=("no_such_module:TOOLS",)).to_dict())
    assert other.id == "other"
    run = store.create_run("other", owner="cli")
    job = store.enqueue_job("place_order", {"symbol": "X", "qty": 1}, session_id="other",
                            tool_call_id="c1")  # fmt: skip
    store.finish_run(run.id, owner="cli", status="awaiting", stop_reason="awaiting_tool",
                     waits=[("c1", job.id)])  # fmt: skip
    work(store)
    failed = store.get_job(job.id)
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and failed.error["kind"] == "unknown_tool"
    (answer,) = results(store, "other")
    assert answer.is_error and "place_order" in answer.content


# Bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "hi", "--db", "sqlite:///x.db"], "--session"),
        (["run", "hi", "--session", "s", "--db", "mysql://u@h/d"], "unsupported database URL"),
        (["session", "show", "nobody", "--db", "{db}"], "no session 'nobody'"),
        (["session", "cancel", "nobody", "--db", "{db}"], "no session 'nobody'"),
        (["worker", "--once", "--db", "{db}", "--results", "xml"], "--results is one of"),
        (["worker", "--once", "--db", "{db}", "--tools", "nope"], "MODULE:ATTR"),
    ],
)
def test_bad_usage_exits_2_and_says_what_is_wrong(
    args: list[str], message: str, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    done = pi(*[a.replace("{db}", db) for a in args], cwd=tmp_path, tmp=tmp_path)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.split()) and done.stdout == ""


def test_a_session_keeps_its_agent(db_url: str, tmp_path: Path, store: Store) -> None:
    in_session(store, "kept", write(tmp_path, "chat.json", CHAT), "test_sessions:TRADING")
    with pytest.raises(UserError, match="a session keeps its agent"):
        open_session(store, "kept", Recipe(model="scripted:/elsewhere.json"))
    # no agent given: the stored one
    _, recipe = open_session(store, "kept")
    assert recipe.tools == ("test_sessions:TRADING",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "no agent recipe"),
        ({"model": "local", "colour": "red"}, "colour: unknown key"),
        ({"tools": "mod:attr"}, "tools: must be a list of strings"),
        ({"tools": ["no-colon"]}, "MODULE:ATTR"),
        ({"limits": {"max_steps": 0}}, "max_steps"),
        ({"job_max_attempts": 0}, "job_max_attempts"),
        ({"job_max_attempts": "many"}, "malformed"),
        ({"limits": {"speed": 3}}, "limits.speed: unknown key"),
        ({"allow": "get_weather"}, "allow: must be a list"),
        ({"output": {"schema": "x.json"}}, "output: must name a JSON Schema"),
    ],
)
def test_a_bad_recipe_is_refused_with_its_reason(data: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        stored_recipe(data)


def test_sessions_of_one_agent_share_its_tools_and_each_reads_its_agent_once(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_order_session(store, "first", tmp_path)
    one_order_session(store, "second", tmp_path)
    loads: list[str] = []
    original = Recipe.load_tools
    monkeypatch.setattr(Recipe, "load_tools", lambda self: loads.append("x") or original(self))
    reads = record_calls(monkeypatch, store, "get_session")
    agents = SessionAgents(store)

    for session_id in ("first", "second", "first"):
        tools = run_blocking(agents.tools(session_id))
        assert tools is not None and set(tools) == {spec.name for spec in TRADING}
    assert len(loads) == 1  # one agent, one set of tools
    assert [args for args, _ in reads] == [("first",), ("second",)]
    with pytest.raises(UserError, match="no agent recipe"):  # not stored: not cached either
        run_blocking(agents.recipe("nobody"))
    assert run_blocking(agents.tools("nobody")) is None


def test_a_busy_worker_claims_without_looking_first_and_an_idle_one_looks(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On SQLite a look (a read) before each claim keeps idle workers off the write lock;
    # a worker whose last claim found work claims at once: one transaction less a step.
    recipe = one_order_session(store, "busy", tmp_path)
    start_turn(store, "busy", recipe, "buy 5 ACME")
    claims = record_calls(monkeypatch, store, "claim_batch")
    stats = work(store)

    assert (dict(stats.jobs), dict(stats.runs)) == ({"succeeded": 1}, {"completed": 1})
    looks = [options["look_first"] for _, options in claims]
    # the job (its result delivered as it ends, and the continuation run): found, then
    # empty; from then on every claim looks first
    assert looks[:2] == [True, False] and all(looks[2:])


def count_statements(store: Store, whole: list[str] | None = None) -> tuple[list[str], list[int]]:
    """Every statement the store sends from now on (its first words; all of it into
    `whole`), and its commits."""
    from sqlalchemy import event

    engine = store._engine  # type: ignore[attr-defined]
    sent: list[str] = []
    commits: list[int] = []

    def on_statement(*args: Any) -> None:
        sent.append(" ".join(args[2].split()[:3]))
        if whole is not None:
            whole.append(" ".join(args[2].split()))

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", lambda conn: commits.append(1))
    return sent, commits


def test_a_jobs_way_through_the_store_takes_few_statements(store: Store, tmp_path: Path) -> None:
    # The whole way of one job: claimed, run, ended with its result delivered and its
    # continuation queued, the continuation read and finished, then two empty looks.
    # Was 37 statements on SQLite and 39 on PostgreSQL: whether a run can be continued
    # is now one statement (not four), a delivered result's call is checked for an
    # answer once, a delivery and a finished run each write their session row once,
    # a delivered job's event is written delivered (not written, then marked), and a
    # job or run being ended is not read twice (its session is found and locked in one
    # statement, then it is read once, current): 30 on PostgreSQL, 29 on SQLite. Then
    # 28 and 27: the call's wait is read with whether the call is answered (one
    # statement, not two), and the continuation of a run that left nobody a decision
    # reads no decisions. Now 23 and 24: a claim reads which kinds of work there are,
    # then looks only there (PostgreSQL's two empty claims at the end are one statement
    # each, not three).
    recipe = one_order_session(store, "few", tmp_path)
    start_turn(store, "few", recipe, "buy 5 ACME")
    whole: list[str] = []
    sent, commits = count_statements(store, whole)
    stats = work(store)
    sent, commits = list(sent), list(commits)  # the worker's only

    assert (dict(stats.jobs), dict(stats.runs)) == ({"succeeded": 1}, {"completed": 1})
    assert store.get_session("few").status == "completed"  # type: ignore[union-attr]
    print(f"{len(sent)} statements, {len(commits)} commits:", sent)
    # (PostgreSQL's two empty looks at the end are claims: SQLite's first one only peeks)
    assert len(sent) <= (23 if store.url.startswith("postgresql") else 24)
    # the delivery (its count with the status the continuation gives), the continuation's
    # end (its messages with the status it leaves)
    assert sent.count("UPDATE sessions SET") == 2
    assert sent.count("SELECT messages.seq FROM") == 0  # answered? asked with the wait
    waits = [s for s in whole if s.startswith("SELECT waits.")]
    assert len(waits) == 1 and "AS answered" in waits[0]
    assert not [s for s in whole if s.startswith("SELECT approvals.")]  # none to read
    assert sent.count("UPDATE outbox SET") == 0


def test_a_sessions_lock_does_not_read_its_agent(store: Store, tmp_path: Path) -> None:
    # A session's agent is JSON of any size (instructions, tools, sub-agents); every
    # write under the session's lock read it, and PostgreSQL parsed it, three times a
    # job. A worker reads it once per session, to build the agent.
    recipe = one_order_session(store, "lean", tmp_path)
    start_turn(store, "lean", recipe, "buy 5 ACME")
    whole: list[str] = []
    count_statements(store, whole)
    stats = work(store)
    assert (dict(stats.jobs), dict(stats.runs)) == ({"succeeded": 1}, {"completed": 1})
    locks = [s for s in whole if s.startswith("SELECT") and "FROM sessions" in s and
             (" FOR " in s or store.url.startswith("sqlite"))]  # fmt: skip
    assert len(locks) >= 2  # the delivery's and the continuation's end, at least
    reads = [s for s in whole if "sessions.agent" in s]
    assert len(reads) == 1 and " FOR " not in reads[0], reads  # the worker's, for its agent
    # and what a lock reads still serves the store's own record of the session
    session = store.get_session("lean")
    assert session is not None and session.agent == recipe.to_dict()


def test_a_continuation_reads_the_runs_its_request_came_through_in_one_statement(
    store: Store, tmp_path: Path
) -> None:
    # Three orders one after another: the request goes through three continuations.
    # What each reads of the runs before it (the request's limits and elapsed time) is
    # one statement, however long the chain (the k-th read k runs, one at a time).
    orders = [
        {"tool_calls": [{"name": "place_order", "arguments": {"symbol": "ACME", "qty": qty}}]}
        for qty in (1, 2, 3)
    ]
    script = write(tmp_path, "three.json", {"steps": [*orders, {"text": "Done."}]})
    recipe = in_session(store, "chain", script, "test_sessions:TRADING")
    start_turn(store, "chain", recipe, "buy ACME three times")
    stats = work(store)
    assert dict(stats.runs) == {"awaiting": 2, "completed": 1}

    runs = store.list_runs("chain")
    assert [r.kind for r in runs] == ["user", "server_result", "server_result", "server_result"]
    whole: list[str] = []
    count_statements(store, whole)
    for k, run in enumerate(runs[1:], start=1):
        whole.clear()
        requested = store.turn_inputs(run).requested
        assert len([s for s in whole if "FROM runs" in s]) == 1
        assert [r.id for r in requested] == [r.id for r in reversed(runs[:k])]
        assert requested == requested_runs(run, store.get_run)  # as walked a run at a time
