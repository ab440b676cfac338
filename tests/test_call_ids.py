"""Tool call ids from the model: each one plain and used once in the conversation the
run keeps (the store refuses a second result for one call, and a session stuck on it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import Agent, tool
from pi_runtime.durable import Store
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.loop import run_blocking
from pi_runtime.messages import AssistantMessage, ToolResultMessage, UserMessage
from pi_runtime.models import FunctionModel, ModelRequest
from pi_runtime.testing import ScriptedModel, text

seen: list[int] = []


@tool
def note(n: int) -> int:
    """Note a number."""
    seen.append(n)
    return n


def calls(*items: tuple[str, int]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": "note", "arguments": {"n": n}} for i, n in items]}


def answered_once(messages: list[Any]) -> list[str]:
    """The conversation's call ids, after checking each has exactly one result."""
    ids = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert sorted(ids) == sorted(results) and len(set(ids)) == len(ids), (ids, results)
    return ids


def test_two_calls_given_one_id_each_get_their_own() -> None:
    seen.clear()
    model = ScriptedModel([calls(("dup", 1), ("dup", 2)), text("done")])
    result = Agent(model, tools=[note], trace_dir=False).run_sync("go")

    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert seen == [1, 2]
    assert answered_once(list(result.messages)) == ["dup", "pi_1_2"]


@pytest.mark.parametrize(
    "bad",
    [
        *(" ", "c1\nX", "c1\x1b[31m", "c1\x00", "a" * 201, "c\u2028x"),
        # not a URL path segment (`/approvals/{call_id}`), or refused by Anthropic's tool ids
        *("call 1", "call/1", "call#1", "call+1", "呼叫1", "_call1", "call.1", "call:1", "c%2F1"),
    ],
)
def test_an_id_the_store_could_not_keep_is_replaced(bad: str) -> None:
    model = ScriptedModel([calls((bad, 1)), text("done")])
    result = Agent(model, tools=[note], trace_dir=False).run_sync("go")

    assert result.status == "completed", result.error
    assert answered_once(list(result.messages)) == ["pi_1_1"]


def test_an_id_used_on_an_earlier_turn_or_in_the_history_is_not_used_again() -> None:
    model = ScriptedModel([calls(("a", 1)), calls(("a", 2), ("pi_2_1", 3)), text("done")])
    result = Agent(model, tools=[note], trace_dir=False).run_sync("go")
    ids = answered_once(list(result.messages))
    assert ids == ["a", "pi_2_1_2", "pi_2_1"]  # the model's own `pi_2_1` stays its call's

    def again(request: ModelRequest) -> dict[str, Any]:  # the history's `a`, once more
        asked = isinstance(request.messages[-1], UserMessage)
        return calls(("a", 4)) if asked else {"text": "done"}

    agent = Agent(FunctionModel(again), tools=[note], trace_dir=False)
    more = agent.run_sync("more", history=result.messages)
    assert more.status == "completed", more.error
    *before, last = answered_once(list(more.messages))
    assert before == ids and last.startswith("pi_") and last not in ids


def test_plain_unique_ids_are_kept_as_the_model_gave_them() -> None:
    kept = ["call_a", "toolu_01A-b", "7", "a" * 200]
    model = ScriptedModel([calls(*((k, i) for i, k in enumerate(kept))), text("done")])
    result = Agent(model, tools=[note], trace_dir=False).run_sync("go")
    response = next(m for m in result.messages if isinstance(m, AssistantMessage))
    assert [c.id for c in response.tool_calls] == kept


@tool(background=True)
def slow_note(n: int) -> int:
    """Note a number, in the background."""
    return n


def test_a_session_given_one_id_twice_ends_its_turn_and_takes_the_next(
    store: Store, tmp_path: Path
) -> None:
    # the store refused the second result ("given two results"): the run escaped with
    # the session and run left `running`, and the next turn was refused
    script = tmp_path / "dup.json"
    steps = [calls(("dup", 1), ("dup", 2)), {"text": "done"}, {"text": "again"}]
    script.write_text(json.dumps({"steps": steps}))
    _, recipe = open_session(
        store, "s1", Recipe(model=f"scripted:{script}", tools=("test_call_ids:note",))
    )
    for prompt in ("go", "and again"):
        turn = run_blocking(
            run_turn(store, "s1", prompt, agent=recipe.build_agent(trace_dir=False), owner="t")
        )
        assert turn.run.status == "completed", turn.result.error
    stored = [m.message for m in store.load_messages("s1")]
    assert answered_once(stored) == ["dup", "pi_1_2"]


def test_background_calls_given_one_id_each_get_their_job(store: Store, tmp_path: Path) -> None:
    script = tmp_path / "dup.json"
    steps = [
        {"tool_calls": [{"id": "x\n", "name": "slow_note", "arguments": {"n": n}} for n in (1, 2)]},
        {"text": "done"},
    ]
    script.write_text(json.dumps({"steps": steps}))
    _, recipe = open_session(
        store, "s2", Recipe(model=f"scripted:{script}", tools=("test_call_ids:slow_note",))
    )
    turn = run_blocking(
        run_turn(store, "s2", "go", agent=recipe.build_agent(trace_dir=False), owner="t")
    )
    assert (turn.run.status, turn.result.stop_reason) == ("awaiting", "awaiting_tool")
    jobs = store.list_jobs("s2")
    assert sorted(j.tool_call_id for j in jobs) == ["pi_1_1", "pi_1_2"]
    assert sorted(j.arguments["n"] for j in jobs) == [1, 2]
