"""Human approval in durable sessions, on SQLite and on PostgreSQL: a run waits in one
process, a person decides in another (`pi approve` / `pi reject` as real subprocesses),
and the call runs at most once — even when the approving process dies right after it ran.
Decisions that are only refused are made in this process (`decide_here`): what they check
is the refusal, and a process each would only add start-up time.

Every refused decision is checked to leave the store exactly as it was.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cli_support import Ran, pi_inprocess, pi_process
from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import Agent, UserError
from pi_runtime.durable import Store, StoredSession, open_store, session_view
from pi_runtime.durable import schema as t
from pi_runtime.durable.migrations import MIGRATIONS, migrate
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker
from pi_runtime.loop import run_blocking
from pi_runtime.observe import read_trace
from pi_runtime.tools import fingerprint, idempotency_key

SHOP = '''
"""Tools of the approval tests: every refund is written to a ledger beside this file."""
import json, os
from pathlib import Path
from pi_runtime import tool

LEDGER = Path(__file__).with_name("ledger.jsonl")

@tool(requires_approval=True, idempotent=False)
def refund(order_id: str, amount: float, idempotency_key: str) -> dict:
    """Refund money for an order.

    Args:
        order_id: the order.
        amount: how much.
    """
    with LEDGER.open("a") as ledger:
        ledger.write(json.dumps([order_id, amount, idempotency_key]) + "\\n")
    if os.environ.get("PI_TEST_CRASH_AFTER_REFUND"):
        os._exit(9)  # the approving process dies right after the refund happened
    return {"refunded": amount, "order_id": order_id}

@tool
def lookup(order_id: str) -> dict:
    """An order's total."""
    return {"order_id": order_id, "total": 80}

@tool(background=True)
def report(order_id: str) -> dict:
    """A long report, run by a worker."""
    return {"order_id": order_id, "lines": 3}

TOOLS = [refund, lookup, report]
'''

REFUND_50 = {"order_id": "A1", "amount": 50}
LOOKUP_AND_REFUND = {
    "steps": [
        {
            "tool_calls": [
                {"name": "lookup", "arguments": {"order_id": "A1"}},
                {"name": "refund", "arguments": REFUND_50},
            ]
        },
        {"text": "Refund handled."},
    ]
}
CALL = "call_0_1"  # the refund's id: the script's first step, second call


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Path]:
    """A folder with the tools module and the script: the tests' current directory.

    Agents built in this process import the module from it: forgotten afterwards, so the
    next test imports its own."""
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    write_script(tmp_path, LOOKUP_AND_REFUND)
    path = list(sys.path)
    yield tmp_path
    sys.path[:] = path
    sys.modules.pop("shop", None)


def write_script(folder: Path, script: dict[str, Any]) -> None:
    (folder / "script.json").write_text(json.dumps(script), encoding="utf-8")


def ledger(folder: Path) -> list[list[Any]]:
    path = folder / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def env(folder: Path, **more: str) -> dict[str, str | None]:
    return {"PI_TRACE_DIR": str(folder / "traces"), **more}


def pi_here(folder: Path, *args: str) -> Ran:
    """`pi ARGS` in this process (the session's first turn)."""
    return pi_inprocess(*args, cwd=folder, env=env(folder))


def pi_apart(folder: Path, *args: str, **more: str) -> Ran:
    """`pi ARGS` as the console script in a process of its own."""
    done = pi_process(*args, cwd=folder, env=env(folder, **more))
    return Ran(done.returncode, done.stdout, done.stderr)


def start(folder: Path, db_url: str, session: str = "s1") -> dict[str, Any]:
    """A turn that ends awaiting the refund's approval."""
    ran = pi_here(
        folder, "run", "refund A1", "--session", session, "--db", db_url,
        "--model", "scripted:script.json", "--tools", "shop:TOOLS", "--json",
    )  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    result: dict[str, Any] = json.loads(ran.stdout)
    assert (result["status"], result["stop_reason"]) == ("awaiting", "awaiting_approval")
    return result


def decide(folder: Path, db_url: str, verb: str, *args: str, **more: str) -> Ran:
    """`pi approve|reject s1 ARGS` in a process of its own."""
    return pi_apart(folder, verb, "s1", *args, "--db", db_url, "--json", **more)


def decide_here(folder: Path, db_url: str, verb: str, *args: str) -> Ran:
    """`pi approve|reject s1 ARGS` in this process."""
    return pi_here(folder, verb, "s1", *args, "--db", db_url, "--json")


def snapshot(store: Store, session_id: str = "s1") -> dict[str, Any]:
    """Everything stored about the session (status, version, messages, runs, waits, jobs,
    approvals, with their times): equal snapshots mean nothing was written."""
    return session_view(store, session_id)


# Approve, edit, reject


def test_approve_from_another_process_runs_the_call_once_and_completes(
    db_url: str, shop: Path, store: Store
) -> None:
    waiting = start(shop, db_url)
    (pending,) = waiting["pending_approvals"]
    assert pending == {
        "call_id": CALL, "tool": "refund", "arguments": REFUND_50,
        "fingerprint": fingerprint(REFUND_50),
    }  # fmt: skip
    view = snapshot(store)
    assert view["status"] == "awaiting_approval"
    assert view["pending_approvals"] == [{**pending, "run_id": waiting["run_id"]}]
    shown = pi_here(shop, "session", "show", "s1", "--db", db_url)
    assert (
        f"awaiting approval: {CALL} refund(" in shown.stdout
        and pending["fingerprint"] in shown.stdout
    )
    assert ledger(shop) == []

    done = decide(shop, db_url, "approve", CALL)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["output"], result["pending_approvals"]) == (
        "completed", "Refund handled.", [],
    )  # fmt: skip
    assert ledger(shop) == [["A1", 50.0, idempotency_key("s1", CALL)]]
    answer = next(m for m in result["messages"] if m.get("tool_call_id") == CALL)
    assert json.loads(answer["content"]) == {"refunded": 50.0, "order_id": "A1"}
    kinds = [json.loads(line)["kind"] for line in Path(result["trace"]).read_text().splitlines()]
    assert kinds[:2] == ["run_started", "approval_granted"]

    view = snapshot(store)
    assert view["status"] == "completed" and view["pending_approvals"] == []
    (approval,) = view["approvals"]
    assert (approval["status"], approval["decided_arguments"]) == ("approved", REFUND_50)
    assert [(r["kind"], r["status"]) for r in view["runs"]] == [
        ("user", "awaiting"), ("server_result", "completed"),
    ]  # fmt: skip
    assert [(j["tool"], j["status"]) for j in view["jobs"]] == [("refund", "succeeded")]


def test_approve_with_edited_arguments_runs_those(db_url: str, shop: Path, store: Store) -> None:
    start(shop, db_url)
    edited = json.dumps({"order_id": "A1", "amount": 30})
    done = decide_here(shop, db_url, "approve", CALL, "--arguments", edited)
    assert done.returncode == 0, done.stderr
    assert ledger(shop) == [["A1", 30.0, idempotency_key("s1", CALL)]]
    (approval,) = snapshot(store)["approvals"]
    assert approval["arguments"] == REFUND_50  # what the model asked, and its fingerprint
    assert approval["decided_arguments"] == {"order_id": "A1", "amount": 30}
    path = json.loads(done.stdout)["trace"]
    trace = Path(path).read_text().splitlines()
    granted = json.loads(trace[1])
    assert (granted["kind"], granted["edited"], granted["arguments"]["amount"]) == (
        "approval_granted", True, 30,
    )  # fmt: skip
    shown = pi_here(shop, "trace", "show", path)
    assert f"refund [{CALL}] approved with edited arguments" in shown.stdout


def test_reject_from_another_process_tells_the_model_why(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    done = decide(shop, db_url, "reject", CALL, "--reason", "Only half: 半额退款.")
    assert done.returncode == 0, done.stderr
    assert ledger(shop) == []
    result = json.loads(done.stdout)
    answer = next(m for m in result["messages"] if m.get("tool_call_id") == CALL)
    assert answer["is_error"] and answer["error"]["kind"] == "rejected"
    assert "Only half: 半额退款." in answer["error"]["message"]
    assert result["status"] == "completed"
    (approval,) = snapshot(store)["approvals"]
    assert (approval["status"], approval["reason"]) == ("rejected", "Only half: 半额退款.")


# Refused decisions change nothing


def test_a_second_decision_is_refused_and_changes_nothing(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    assert decide_here(shop, db_url, "approve", CALL).returncode == 0
    before = snapshot(store)

    again = decide_here(shop, db_url, "approve", CALL)
    assert again.returncode == 2 and f"call '{CALL}' was already approved" in again.stderr
    assert again.stdout == ""
    rejected = decide_here(shop, db_url, "reject", CALL, "--reason", "too late")
    assert rejected.returncode == 2 and "already approved" in rejected.stderr
    assert snapshot(store) == before
    assert len(ledger(shop)) == 1


def test_a_stale_fingerprint_is_refused_and_changes_nothing(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    before = snapshot(store)
    reviewed = fingerprint({"order_id": "A1", "amount": 5})  # an older review
    stale = decide_here(shop, db_url, "approve", CALL, "--fingerprint", reviewed)
    assert stale.returncode == 2 and "stale fingerprint" in stale.stderr
    assert snapshot(store) == before and ledger(shop) == []

    # arguments changed in the store after the review: refused, whoever asks
    set_stored_arguments(db_url, {"order_id": "A1", "amount": 99})
    changed = snapshot(store)
    refused = decide_here(shop, db_url, "approve", CALL)
    assert refused.returncode == 2 and "nobody reviewed" in refused.stderr
    assert snapshot(store) == changed and ledger(shop) == []

    set_stored_arguments(db_url, REFUND_50)
    good = decide_here(shop, db_url, "approve", CALL, "--fingerprint", fingerprint(REFUND_50))
    assert good.returncode == 0, good.stderr
    assert len(ledger(shop)) == 1


def _sa_url(db_url: str) -> str:
    return db_url.replace("postgresql://", "postgresql+psycopg://")


def set_stored_arguments(db_url: str, arguments: dict[str, Any]) -> None:
    """Change the waiting call's stored arguments behind the store's back."""
    engine = sa.create_engine(_sa_url(db_url))
    try:
        with engine.begin() as conn:
            conn.execute(t.approvals.update().values(arguments=arguments))
    finally:
        engine.dispose()


def test_unknown_calls_and_sessions_not_waiting_are_refused_and_change_nothing(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    before = snapshot(store)
    cases = [
        (
            ("approve", "s1", "call_9"),
            "no call 'call_9' waits for approval in session 's1'; waiting: call_0_1",
        ),
        (("approve", "nobody", CALL), "no session 'nobody'"),
        (("reject", "s1", "call_0_0", "--reason", "x"), "no call 'call_0_0' waits"),
        (("approve", "s1", CALL, "--arguments", '{"order_id": "A1"}'), "amount"),
        (("approve", "s1", CALL, "--arguments", "[1, 2]"), "one JSON object"),
        (("approve", "s1", CALL, "--arguments", '{"order_id": "A1", "amount": 5, "x": 1}'), "x"),
        (("reject", "s1", CALL, "--reason", "  "), "needs a reason"),
    ]
    for args, message in cases:
        ran = pi_here(shop, *args, "--db", db_url)
        assert ran.returncode == 2, (args, ran.stderr)
        assert message in ran.stderr, (args, ran.stderr)
        assert snapshot(store) == before, args
    assert ledger(shop) == []

    assert decide_here(shop, db_url, "approve", CALL).returncode == 0
    done = snapshot(store)
    ran = pi_here(shop, "reject", "s1", "call_0_1", "--reason", "x", "--db", db_url)
    assert ran.returncode == 2 and "already approved" in ran.stderr
    ran = pi_here(shop, "approve", "s1", "call_7", "--db", db_url)
    assert ran.returncode == 2 and "is completed: no call waits for approval" in ran.stderr
    assert snapshot(store) == done


def test_a_new_prompt_on_a_session_awaiting_approval_is_refused_with_what_to_do(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    before = snapshot(store)
    ran = pi_here(shop, "run", "hello", "--session", "s1", "--db", db_url)
    assert ran.returncode == 2
    assert "awaiting_approval" in ran.stderr and "`pi approve` or `pi reject`" in ran.stderr
    assert snapshot(store) == before


# Exactly once


def test_a_crash_right_after_the_approved_call_ran_never_runs_it_twice(
    db_url: str, shop: Path, store_factory: Callable[..., Store]
) -> None:
    start(shop, db_url)
    crashed = decide(shop, db_url, "approve", CALL, PI_TEST_CRASH_AFTER_REFUND="1")
    assert crashed.returncode == 9, crashed.stderr  # died before recording the result
    assert len(ledger(shop)) == 1
    store = store_factory()  # its clock is past the dead approver's lease
    before = snapshot(store)
    assert before["status"] == "awaiting_server_tool"
    assert [(j["tool"], j["status"]) for j in before["jobs"]] == [("refund", "running")]

    again = decide(shop, db_url, "approve", CALL)
    assert again.returncode == 2 and "already approved" in again.stderr
    assert "pi worker" in again.stderr
    assert snapshot(store) == before and len(ledger(shop)) == 1

    # a worker takes the dead approver's job over: the refund is not idempotent, so its
    # outcome is unknown rather than run again; the model is told, the session goes on
    stats = asyncio.run(Worker(store, poll_s=0.01, trace_dir=False).run(once=True))
    assert dict(stats.deliveries) == {"delivered": 1} and dict(stats.runs) == {"completed": 1}
    assert len(ledger(shop)) == 1
    view = snapshot(store)
    assert view["status"] == "completed"
    (answer,) = [m for m in view["messages"] if m.get("tool_call_id") == CALL]
    assert answer["is_error"] and answer["error"]["kind"] == "outcome_unknown"
    assert [(j["tool"], j["status"]) for j in view["jobs"]] == [("refund", "outcome_unknown")]


def test_two_approvers_racing_run_the_call_once(db_url: str, shop: Path, store: Store) -> None:
    start(shop, db_url)
    agent = _agent(store)

    async def both() -> list[Any]:
        return await asyncio.gather(
            agent.approve(StoredSession(store, "s1", owner="a"), CALL),
            agent.approve(StoredSession(store, "s1", owner="b"), CALL),
            return_exceptions=True,
        )

    outcomes = asyncio.run(both())
    assert sorted(type(o).__name__ for o in outcomes) == ["RunResult", "UserError"]
    assert len(ledger(shop)) == 1


# The Python API on a stored session


def _agent(store: Store) -> Agent:
    session = store.get_session("s1")
    assert session is not None
    return Recipe.from_dict(session.agent or {}).build_agent(trace_dir=False)


def test_agent_approve_and_reject_decide_a_stored_session(
    db_url: str, shop: Path, store: Store
) -> None:
    write_script(
        shop,
        {
            "steps": [
                {
                    "tool_calls": [
                        {"name": "refund", "arguments": {"order_id": "A1", "amount": 10}},
                        {"name": "refund", "arguments": {"order_id": "A2", "amount": 20}},
                    ]
                },
                {"text": "One refunded, one declined."},
            ]
        },
    )
    start(shop, db_url)
    agent = _agent(store)
    target = StoredSession(store, "s1")

    halfway = agent.approve_sync(target, "call_0_0")
    assert (halfway.status, halfway.stop_reason) == ("awaiting", "awaiting_approval")
    assert [p.call_id for p in halfway.pending_approvals] == ["call_0_1"]
    assert store.get_session("s1").status == "awaiting_approval"  # type: ignore[union-attr]
    assert [r[:2] for r in ledger(shop)] == [["A1", 10.0]]

    done = agent.reject_sync(target, "call_0_1", reason="A2 was never paid")
    assert (done.status, done.output) == ("completed", "One refunded, one declined.")
    assert [e.kind for e in done.events[:3]] == [
        "run_started", "approval_granted", "approval_rejected",
    ]  # fmt: skip
    assert [r[:2] for r in ledger(shop)] == [["A1", 10.0]]
    with pytest.raises(UserError, match="already rejected"):
        agent.approve_sync(target, "call_0_1")


def test_an_approval_and_a_background_job_of_one_reply_are_both_awaited(
    db_url: str, shop: Path, store: Store
) -> None:
    write_script(
        shop,
        {
            "steps": [
                {
                    "tool_calls": [
                        {"name": "report", "arguments": {"order_id": "A1"}},
                        {"name": "refund", "arguments": REFUND_50},
                    ]
                },
                {"text": "Report and refund done."},
            ]
        },
    )
    recipe = Recipe(
        model=f"scripted:{shop / 'script.json'}", tools=("shop:TOOLS",), import_path=str(shop)
    )
    open_session(store, "s1", recipe)
    turn = run_blocking(
        run_turn(store, "s1", "refund A1", agent=recipe.build_agent(trace_dir=False), owner="cli")
    )
    assert turn.result.stop_reason == "awaiting_approval"
    assert len(turn.result.waits) == 1 and len(turn.result.pending_approvals) == 1

    halfway = _agent(store).approve_sync(StoredSession(store, "s1"), CALL)
    assert (halfway.status, halfway.stop_reason) == ("awaiting", "awaiting_tool")
    assert store.get_session("s1").status == "awaiting_server_tool"  # type: ignore[union-attr]

    traces = shop / "traces"
    stats = asyncio.run(Worker(store, poll_s=0.01, trace_dir=traces).run(once=True))
    assert dict(stats.runs) == {"completed": 1}
    view = snapshot(store)
    assert view["status"] == "completed"
    assert view["messages"][-1]["content"][0]["text"] == "Report and refund done."
    # the run the job's delivery continued opens with the decision taken before it
    (after,) = [r for r in store.list_runs("s1") if r.kind == "server_result"]
    opening = [e["kind"] for e in read_trace(traces / f"{after.id}.jsonl")][:2]
    assert opening == ["run_started", "approval_granted"]


def test_cancelling_answers_the_waiting_calls_and_a_later_decision_is_refused(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    cancelled = pi_here(shop, "session", "cancel", "s1", "--db", db_url, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["approvals_cancelled"] == [CALL]
    view = snapshot(store)
    (answer,) = [m for m in view["messages"] if m.get("tool_call_id") == CALL]
    assert answer["error"]["kind"] == "cancelled"
    ran = pi_here(shop, "approve", "s1", CALL, "--db", db_url)
    assert ran.returncode == 2 and "already cancelled" in ran.stderr
    assert snapshot(store) == view and ledger(shop) == []


def test_a_database_made_before_approvals_gains_their_table(db_url: str) -> None:
    engine = sa.create_engine(_sa_url(db_url))
    try:
        with engine.begin() as conn:
            migrate(conn, datetime.now(UTC), MIGRATIONS[:1])
        assert "approvals" not in sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()
    store = open_store(db_url)
    try:
        assert store.migrations() == [m.name for m in MIGRATIONS]
        assert store.list_approvals(store.create_session("old").id) == []
    finally:
        store.close()


def test_a_continuation_that_cannot_start_still_reports_the_decision_recorded(
    db_url: str, shop: Path, store: Store
) -> None:
    start(shop, db_url)
    blocked = shop / "traces-here-is-a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    session = store.get_session("s1")
    assert session is not None
    agent = Recipe.from_dict(session.agent or {}).build_agent(trace_dir=blocked)

    result = agent.approve_sync(StoredSession(store, "s1"), CALL)

    # not "refused": the refund ran once and the approval is stored
    assert (result.status, result.stop_reason) == ("failed", "internal_error")
    assert result.error is not None and "decision was recorded" in result.error
    assert "cannot write traces" in result.error
    assert [r[:2] for r in ledger(shop)] == [["A1", 50.0]]
    (approval,) = store.list_approvals("s1")
    assert approval.status == "approved"
    continued = [r for r in store.list_runs("s1") if r.id == result.run_id]
    assert [(r.status, r.stop_reason) for r in continued] == [("failed", "internal_error")]
    with pytest.raises(UserError, match="already approved"):
        agent.approve_sync(StoredSession(store, "s1"), CALL)
