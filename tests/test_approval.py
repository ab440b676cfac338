"""Human approval in memory: a call to a tool needing approval is checked but not run, the
run ends `awaiting_approval`, and `Agent.approve` / `Agent.reject` decide it — once, bound
to the fingerprint of the arguments reviewed — and continue the run.

Durable sessions (across processes, SQLite and PostgreSQL) are in
`test_approval_sessions.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import (
    Agent,
    Allow,
    Deny,
    Guardrails,
    PendingApproval,
    Rewrite,
    RunResult,
    UserError,
    tool,
)
from pi_runtime.loop.definition import AgentDefinition
from pi_runtime.messages import ToolResultMessage
from pi_runtime.messages.canonical import canonical_json
from pi_runtime.observe import read_events
from pi_runtime.testing import ScriptedModel, function_call, parallel_calls, text
from pi_runtime.tools import fingerprint

refunds: list[tuple[str, float, str | None]] = []


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    refunds.clear()


@tool(requires_approval=True, idempotent=False)
def refund(order_id: str, amount: float, idempotency_key: str) -> dict[str, Any]:
    """Refund money for an order.

    Args:
        order_id: the order.
        amount: how much; at most 100.
    """
    if amount > 100:
        raise ValueError("at most 100")
    refunds.append((order_id, amount, idempotency_key))
    return {"refunded": amount, "order_id": order_id}


@tool
def lookup(order_id: str) -> dict[str, Any]:
    """An order's total."""
    return {"order_id": order_id, "total": 80}


@tool
def close_account(customer_id: str) -> str:
    """Close an account."""
    return f"closed {customer_id}"


REFUND_50 = {"order_id": "A1", "amount": 50}
LOOKUP_AND_REFUND = [
    parallel_calls(function_call("lookup", {"order_id": "A1"}), function_call("refund", REFUND_50)),
    text("Refund handled."),
]


def agent(script: list[Any], *, tmp: Path | None = None, **options: Any) -> Agent:
    options.setdefault("tools", [refund, lookup, close_account])
    return Agent(ScriptedModel(script), trace_dir=tmp or False, **options)


def awaiting(a: Agent, prompt: str = "refund A1") -> RunResult:
    result = a.run_sync(prompt)
    assert (result.status, result.stop_reason) == ("awaiting", "awaiting_approval"), result.error
    return result


def answer_to(result: RunResult, call_id: str) -> ToolResultMessage:
    (found,) = [
        m for m in result.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id
    ]
    return found


# The run stops, the other calls of the reply run


def test_a_call_needing_approval_is_checked_but_not_run_while_the_other_call_runs(
    tmp_path: Path,
) -> None:
    result = awaiting(agent(LOOKUP_AND_REFUND, tmp=tmp_path))

    assert refunds == []
    (pending,) = result.pending_approvals
    assert (pending.call_id, pending.tool, pending.arguments) == ("call_0_1", "refund", REFUND_50)
    digest = hashlib.sha256(canonical_json(REFUND_50).encode()).hexdigest()
    assert pending.fingerprint == digest
    # the lookup beside it ran and was answered; the refund has no answer yet
    assert json.loads(answer_to(result, "call_0_0").content) == {"order_id": "A1", "total": 80}
    assert "call_0_1" not in {
        m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)
    }
    data = result.to_dict()
    assert data["pending_approvals"] == [
        {"call_id": "call_0_1", "tool": "refund", "arguments": REFUND_50, "fingerprint": digest}
    ]
    assert result.trace is not None
    (asked,) = [e for e in read_events(Path(result.trace)) if e.kind == "approval_requested"]
    assert (asked.tool_call_id, asked.fingerprint) == ("call_0_1", digest)  # type: ignore[union-attr]


def test_the_fingerprint_ignores_key_order_whitespace_and_number_spelling() -> None:
    assert fingerprint({"a": 1, "b": [1.0, "x"]}) == fingerprint({"b": [1, "x"], "a": 1.0})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint({})) == 64


def test_arguments_the_schema_refuses_are_answered_at_once_and_nobody_is_asked() -> None:
    script = [function_call("refund", {"order_id": "A1"}), text("I need an amount.")]
    result = agent(script).run_sync("refund A1")

    assert result.status == "completed" and result.pending_approvals == ()
    assert answer_to(result, "call_0_0").error.kind == "invalid_arguments"  # type: ignore[union-attr]


def test_a_truncated_call_is_refused_as_truncated_not_sent_for_approval() -> None:
    script = [
        function_call("refund", REFUND_50, finish_reason="length"),
        text("My output was cut off."),
    ]
    result = agent(script).run_sync("refund A1")

    assert result.pending_approvals == ()
    assert answer_to(result, "call_0_0").error.kind == "truncated_call"  # type: ignore[union-attr]


def test_the_agent_files_approval_list_makes_a_plain_tool_wait(tmp_path: Path) -> None:
    script = [function_call("close_account", {"customer_id": "c7"}), text("Closed.")]
    a = agent(script, approval=["close_account"])
    assert a.approval == {"close_account", "refund"}  # listed, and marked in code
    result = awaiting(a)
    assert [p.tool for p in result.pending_approvals] == ["close_account"]

    with pytest.raises(UserError, match="approval names tools the agent does not have: nope"):
        agent(script, approval=["nope"])
    definition = AgentDefinition(tools=("test_approval:ALL",), approval=("close_account",))
    assert definition.to_dict()["approval"] == ["close_account"]
    assert AgentDefinition.from_dict(definition.to_dict()).approval == ("close_account",)
    with pytest.raises(UserError, match="approval"):
        AgentDefinition(approval="close_account")  # type: ignore[arg-type]


ALL = [refund, lookup, close_account]


def test_an_agent_file_with_approval_builds_an_agent_that_waits(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"tool_calls": [{"name": "close_account", "arguments": {"customer_id": "c7"}}]}
                ]
            }
        )
    )
    file = tmp_path / "agent.toml"
    file.write_text(
        f'model = "scripted:{script}"\ntools = ["test_approval:ALL"]\napproval = ["close_account"]\n'
    )
    a = Agent.from_file(file, trace_dir=False)
    assert a.approval == {"close_account", "refund"}
    assert awaiting(a).pending_approvals[0].tool == "close_account"

    file.write_text(
        f'model = "scripted:{script}"\ntools = ["test_approval:ALL"]\napproval = ["nope"]\n'
    )
    with pytest.raises(UserError, match=r"agent.toml:3: approval: .*nope"):
        Agent.from_file(file, trace_dir=False)


# Approve


def test_approve_runs_the_call_once_under_its_idempotency_key_and_continues(
    tmp_path: Path,
) -> None:
    a = agent(LOOKUP_AND_REFUND, tmp=tmp_path)
    first = awaiting(a)
    done = a.approve_sync(first, "call_0_1")

    assert (done.status, done.output) == ("completed", "Refund handled.")
    ((order, amount, key),) = refunds
    assert (order, amount) == ("A1", 50.0)
    assert key is not None and key.startswith("pi-")
    answer = answer_to(done, "call_0_1")
    assert not answer.is_error and json.loads(answer.content) == {
        "refunded": 50.0,
        "order_id": "A1",
    }
    # the continued run's trace opens with the decision
    assert done.trace is not None and done.run_id != first.run_id
    kinds = [e.kind for e in read_events(Path(done.trace))]
    assert kinds[:2] == ["run_started", "approval_granted"]
    granted = next(e for e in done.events if e.kind == "approval_granted")
    assert (granted.arguments, granted.edited) == (REFUND_50, False)  # type: ignore[union-attr]


def test_approve_with_edited_arguments_runs_those_and_says_they_were_edited() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    done = a.approve_sync(first, "call_0_1", {"order_id": "A1", "amount": 30})

    assert done.status == "completed"
    assert [(o, amt) for o, amt, _ in refunds] == [("A1", 30.0)]
    granted = next(e for e in done.events if e.kind == "approval_granted")
    assert granted.edited and granted.arguments == {"order_id": "A1", "amount": 30}  # type: ignore[union-attr]
    assert granted.fingerprint == first.pending_approvals[0].fingerprint  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("edited", "problem"),
    [
        ({"order_id": "A1"}, "amount"),
        ({"order_id": "A1", "amount": "lots"}, "amount"),
        ({"order_id": "A1", "amount": 5, "extra": 1}, "extra"),
        (["A1", 5], "JSON object"),
    ],
)
def test_edited_arguments_the_schema_refuses_are_refused_and_nothing_runs(
    edited: Any, problem: str
) -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    with pytest.raises(UserError, match=problem):
        a.approve_sync(first, "call_0_1", edited)
    assert refunds == []
    # nothing was decided: the call can still be approved
    assert a.approve_sync(first, "call_0_1").status == "completed"
    assert len(refunds) == 1


# Reject


def test_reject_never_runs_the_call_and_the_model_reads_why() -> None:
    model = ScriptedModel(LOOKUP_AND_REFUND)
    a = Agent(model, tools=[refund, lookup], trace_dir=False)
    first = awaiting(a)
    done = a.reject_sync(first, "call_0_1", reason="Only half: the lid is fine.")

    assert refunds == [] and done.status == "completed"
    seen = model.calls[-1].messages[-1]
    assert isinstance(seen, ToolResultMessage) and seen.tool_call_id == "call_0_1"
    assert seen.is_error and seen.error is not None and seen.error.kind == "rejected"
    assert "Only half: the lid is fine." in json.loads(seen.content)["message"]
    assert json.loads(seen.content)["hint"]
    rejected = next(e for e in done.events if e.kind == "approval_rejected")
    assert rejected.reason == "Only half: the lid is fine."  # type: ignore[union-attr]


@pytest.mark.parametrize("reason", ["", "   ", "x" * 4001, "bad \x00 idea", "\x00", "ring\x07"])
def test_a_rejection_needs_a_short_reason(reason: str) -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    with pytest.raises(UserError, match="reason"):
        a.reject_sync(first, "call_0_1", reason=reason)
    assert a.reject_sync(first, "call_0_1", reason="no").status == "completed"


# Refusals


def test_a_second_decision_on_the_same_call_is_refused_and_the_call_ran_once() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    done = a.approve_sync(first, "call_0_1")
    for again in (
        lambda: a.approve_sync(first, "call_0_1"),
        lambda: a.reject_sync(first, "call_0_1", reason="changed my mind"),
        lambda: a.approve_sync(done, "call_0_1"),
    ):
        with pytest.raises(UserError, match="already decided"):
            again()
    assert len(refunds) == 1


def test_two_decisions_taken_at_once_run_the_call_once(tmp_path: Path) -> None:
    async def slow_policy(arguments: dict[str, Any]) -> Allow:
        await asyncio.sleep(0.01)  # an async check: both decisions are in flight at once
        return Allow()

    a = agent(LOOKUP_AND_REFUND, guardrails=Guardrails(tools={"refund": [slow_policy]}))
    first = awaiting(a)

    async def both() -> list[Any]:
        twice = (a.approve(first, "call_0_1"), a.approve(first, "call_0_1"))
        return await asyncio.gather(*twice, return_exceptions=True)

    done, again = asyncio.run(both())
    assert isinstance(done, RunResult) and done.status == "completed"
    assert isinstance(again, UserError) and "already decided" in str(again)
    assert len(refunds) == 1


def test_a_decision_on_a_result_a_later_one_superseded_is_refused() -> None:
    a = agent(
        [
            parallel_calls(
                function_call("refund", REFUND_50),
                function_call("refund", {"order_id": "A2", "amount": 5}),
            ),
            text("Both refunded."),
        ]
    )
    first = awaiting(a)
    half = a.approve_sync(first, "call_0_0")
    with pytest.raises(UserError, match="out of date"):
        a.approve_sync(first, "call_0_1")  # `first` still lists call_0_0 as waiting
    done = a.approve_sync(half, "call_0_1")
    assert done.status == "completed"
    assert sorted(r[0] for r in refunds) == ["A1", "A2"]


def test_runs_of_one_session_are_decided_apart() -> None:
    a = agent(
        [
            function_call("refund", REFUND_50),
            text("Done."),
            function_call("refund", REFUND_50),
            text("Done again."),
        ]
    )
    one = a.run_sync("refund A1", session_id="s")
    two = a.run_sync("refund A1 again", session_id="s")
    assert [p.call_id for p in one.pending_approvals] == [p.call_id for p in two.pending_approvals]
    assert a.approve_sync(one, "call_0_0").status == "completed"
    assert a.reject_sync(two, "call_0_0", reason="once is enough").status == "completed"
    assert len(refunds) == 1


def test_edited_arguments_go_through_the_tools_guardrails() -> None:
    def small_refunds(arguments: dict[str, Any]) -> Allow | Deny | Rewrite:
        if arguments["amount"] > 60:
            return Deny("refunds over 60 need a manager")
        if arguments["order_id"] != arguments["order_id"].upper():
            return Rewrite({**arguments, "order_id": arguments["order_id"].upper()})
        return Allow()

    a = agent(LOOKUP_AND_REFUND, guardrails=Guardrails(tools={"refund": [small_refunds]}))
    first = awaiting(a)
    with pytest.raises(UserError, match=r"refused: Guardrail .*small_refunds .*over 60"):
        a.approve_sync(first, "call_0_1", {"order_id": "A1", "amount": 90})
    assert refunds == []  # nothing ran, and the call still waits
    done = a.approve_sync(first, "call_0_1", {"order_id": "a1", "amount": 20})
    assert done.status == "completed"
    assert [r[:2] for r in refunds] == [("A1", 20.0)]  # as the guardrail rewrote them
    granted = next(e for e in done.events if e.kind == "approval_granted")
    assert granted.arguments == {"order_id": "A1", "amount": 20}  # type: ignore[union-attr]


def test_a_stale_fingerprint_is_refused() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    reviewed = fingerprint({"order_id": "A1", "amount": 5})  # what someone else looked at
    with pytest.raises(UserError, match="stale fingerprint"):
        a.approve_sync(first, "call_0_1", fingerprint=reviewed)
    with pytest.raises(UserError, match="stale fingerprint"):
        a.reject_sync(first, "call_0_1", reason="no", fingerprint=reviewed)
    assert refunds == []
    done = a.approve_sync(first, "call_0_1", fingerprint=first.pending_approvals[0].fingerprint)
    assert done.status == "completed" and len(refunds) == 1


def test_pending_arguments_changed_since_the_review_are_refused() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    (pending,) = first.pending_approvals
    tampered = PendingApproval(
        call_id=pending.call_id,
        tool=pending.tool,
        arguments={"order_id": "A1", "amount": 99},
        fingerprint=pending.fingerprint,
    )
    forged = PendingApproval.of(pending.call_id, pending.tool, {"order_id": "A1", "amount": 99})
    for changed in (tampered, forged):
        result = RunResult(**{**_fields(first), "pending_approvals": (changed,)})
        with pytest.raises(UserError, match="nobody reviewed"):
            a.approve_sync(result, "call_0_1")
    assert refunds == []


def _fields(result: RunResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in RunResult.__dataclass_fields__}


def test_an_unknown_call_and_a_run_that_is_not_waiting_are_refused() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)
    with pytest.raises(UserError, match=r"no call 'call_9' waits for approval; waiting: call_0_1"):
        a.approve_sync(first, "call_9")
    with pytest.raises(UserError, match="already decided"):
        a.approve_sync(first, "call_0_0")  # answered: the lookup ran
    finished = agent([text("Hello.")]).run_sync("hi")
    with pytest.raises(UserError, match="not waiting for an approval"):
        a.approve_sync(finished, "call_0_1")
    with pytest.raises(UserError, match="RunResult"):
        a.approve_sync("session-1", "call_0_1")  # type: ignore[arg-type]
    assert refunds == []


def test_approve_sync_inside_an_event_loop_says_to_await() -> None:
    a = agent(LOOKUP_AND_REFUND)
    first = awaiting(a)

    async def inside() -> None:
        with pytest.raises(UserError, match="await"):
            a.approve_sync(first, "call_0_1")
        done = await a.approve(first, "call_0_1")
        assert done.status == "completed"

    asyncio.run(inside())
    assert len(refunds) == 1


# Several calls waiting


def test_a_run_continues_only_once_every_waiting_call_is_decided(tmp_path: Path) -> None:
    script = [
        parallel_calls(
            function_call("refund", {"order_id": "A1", "amount": 10}),
            function_call("refund", {"order_id": "A2", "amount": 20}),
        ),
        text("One refunded, one declined."),
    ]
    model = ScriptedModel(script)
    a = Agent(model, tools=[refund], trace_dir=tmp_path)
    first = awaiting(a)
    assert [p.call_id for p in first.pending_approvals] == ["call_0_0", "call_0_1"]

    halfway = a.approve_sync(first, "call_0_0")
    assert (halfway.status, halfway.stop_reason) == ("awaiting", "awaiting_approval")
    assert [p.call_id for p in halfway.pending_approvals] == ["call_0_1"]
    assert halfway.steps == 0 and len(model.calls) == 1  # the model was not asked yet
    assert [(o, amt) for o, amt, _ in refunds] == [("A1", 10.0)]

    done = a.reject_sync(halfway, "call_0_1", reason="A2 was never paid")
    assert done.output == "One refunded, one declined." and len(model.calls) == 2
    assert [(o, amt) for o, amt, _ in refunds] == [("A1", 10.0)]
    assert done.trace is not None
    decisions = [e.kind for e in read_events(Path(done.trace)) if e.kind.startswith("approval_")]
    assert decisions == ["approval_granted", "approval_rejected"]


# The example


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "approval" / "agent.toml"


def test_the_example_refund_waits_for_approval_and_runs_once_when_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.approval.tools import ledger

    monkeypatch.setenv("PI_REFUND_LEDGER", str(tmp_path / "refunds.jsonl"))
    a = Agent.from_file(EXAMPLE, trace_dir=False)
    first = awaiting(a, "Order A-1001 arrived broken, please refund it")
    (pending,) = first.pending_approvals
    assert (pending.tool, pending.arguments["amount"]) == ("refund", 48.0)
    assert ledger() == []

    done = a.approve_sync(first, pending.call_id, {**pending.arguments, "amount": 24.0})
    assert done.status == "completed"
    ((entry,),) = [ledger()]
    assert (entry["order_id"], entry["amount"]) == ("A-1001", 24.0)


def test_the_example_refund_rejected_never_reaches_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.approval.tools import ledger

    monkeypatch.setenv("PI_REFUND_LEDGER", str(tmp_path / "refunds.jsonl"))
    a = Agent.from_file(EXAMPLE, trace_dir=False)
    first = awaiting(a, "Order A-1001 arrived broken, please refund it")
    done = a.reject_sync(first, "call_0_1", reason="Ask for a photo of the damage first.")
    assert done.status == "completed" and ledger() == []
    assert "close_account" in a.approval  # marked in code, besides the file's list


# With tool guardrails: they run first, so a person reviews what would run


def test_a_tool_guardrail_denies_before_any_approval_waits() -> None:
    from pi_runtime import Deny, Guardrails

    a = agent(
        [function_call("refund", REFUND_50), text("I may not refund that.")],
        guardrails=Guardrails(tools={"refund": [lambda args: Deny("refunds are paused")]}),
    )
    result = a.run_sync("refund A1")
    assert result.stop_reason == "final_answer"
    assert result.pending_approvals == ()
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error and json.loads(answer.content)["kind"] == "permission_denied"
    assert refunds == []


def test_a_person_reviews_and_approves_the_arguments_a_tool_guardrail_rewrote() -> None:
    from pi_runtime import Guardrails, Rewrite

    def cap(args: dict[str, Any]) -> Rewrite:
        return Rewrite({**args, "amount": min(args["amount"], 30)}, reason="capped at 30")

    a = agent(
        [function_call("refund", REFUND_50), text("Refunded 30.")],
        guardrails=Guardrails(tools={"refund": [cap]}),
    )
    result = awaiting(a)
    (pending,) = result.pending_approvals
    assert pending.arguments == {"order_id": "A1", "amount": 30}
    assert pending.fingerprint == fingerprint({"order_id": "A1", "amount": 30})
    done = a.approve_sync(result, pending.call_id)
    assert done.stop_reason == "final_answer", done.error
    assert [(o, amount) for o, amount, _ in refunds] == [("A1", 30)]
