"""Sub-agents share one budget and nest a bounded depth.

The stories: ten sub-agents called in one reply share what the parent has left, instead
of each getting all of it; sub-agents calling their models at the same moment see each
other's input; a fan-out that nests stays within one model call of the budget, for
tokens and for cost; an agent given itself as a tool stops delegating eight levels down
with a tool error its model reads, instead of recursing until Python gives up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pi_runtime import Agent, Limits, RunResult, tool
from pi_runtime.messages import ToolResultMessage
from pi_runtime.models import ModelRequest
from pi_runtime.observe import ChildRun, GuardTriggered
from pi_runtime.testing import FunctionModel


def fan_out(n: int, name: str = "helper", usage: dict[str, Any] | None = None) -> FunctionModel:
    """A parent model that calls `name` `n` times in one reply, then answers."""
    spent = usage or {"input_tokens": 100, "output_tokens": 5}

    def parent(request: ModelRequest) -> dict[str, Any]:
        if request.messages[-1].role == "tool":
            return {"text": "all done", "usage": spent}
        calls = [{"name": name, "arguments": {"task": f"part {i}"}} for i in range(n)]
        return {"tool_calls": calls, "usage": spent}

    return FunctionModel(parent, keep_calls=False)


def children(result: RunResult) -> list[ChildRun]:
    return [e for e in result.events if isinstance(e, ChildRun)]


def budget_guards(result: RunResult) -> list[str]:
    return [e.guard for e in result.events if isinstance(e, GuardTriggered)]


def test_parallel_children_share_the_parents_token_budget() -> None:
    # the reviewer's case: each child's one call costs 9,010 tokens, the parent may use
    # 10,000 in all; before, each child got all of what was left: 90,205 tokens
    def child_turn(request: ModelRequest) -> dict[str, Any]:
        return {"text": "child report", "usage": {"input_tokens": 9000, "output_tokens": 10}}

    child = Agent(FunctionModel(child_turn, keep_calls=False), trace_dir=False)
    parent = Agent(
        fan_out(10),
        tools=[child.as_tool("helper", "A helper.")],
        limits=Limits(token_budget=10_000),
        trace_dir=False,
    )
    result = parent.run_sync("go")

    assert result.stop_reason == "token_budget"
    assert 10_000 < result.usage.total_tokens <= 10_000 + 9_010  # one call over, at most
    runs = children(result)
    assert len(runs) == 10
    refused = [r for r in runs if r.stop_reason == "token_budget" and r.usage.total_tokens == 0]
    assert len(refused) >= 8  # they stopped before calling their model
    errors = [m for m in result.messages if isinstance(m, ToolResultMessage) and m.is_error]
    assert errors and all("token_budget" in m.content for m in errors)


def test_children_calling_their_models_at_once_see_each_others_input() -> None:
    # the models answer only after every child has had its turn to start: a child sees
    # its siblings' spend only through the input they hold while their calls run
    async def child_turn(request: ModelRequest) -> dict[str, Any]:
        for _ in range(20):
            await asyncio.sleep(0)
        return {"text": "ok"}  # no usage reported: Pi counts it

    def child_agent() -> Agent:
        model = FunctionModel(child_turn, keep_calls=False)
        return Agent(model, instructions="Read this. " * 1500, trace_dir=False)

    one = child_agent().run_sync("part 0").usage  # what one child's call costs
    parent_spend = 105
    budget = parent_spend + one.total_tokens + one.input_tokens // 2
    parent = Agent(
        fan_out(10),
        tools=[child_agent().as_tool("helper", "A helper.")],
        limits=Limits(token_budget=budget),
        trace_dir=False,
    )
    result = parent.run_sync("go")

    assert result.stop_reason == "token_budget"
    called = [r for r in children(result) if r.usage.total_tokens]
    assert len(called) == 2  # two fit, as if they had run one after another
    # the guarantee: one call over, plus what the others spent past their counted input
    # (here Pi counted the input itself, so that is their output)
    over = result.usage.total_tokens - budget
    largest = max(r.usage.total_tokens for r in called)
    assert 0 < over <= largest + sum(r.usage.output_tokens for r in called)


def test_a_nested_fan_out_stays_within_one_call_of_the_token_budget() -> None:
    # three sub-agents a level, four levels: 26,013 tokens against 10,000 before
    def turn(request: ModelRequest) -> dict[str, Any]:
        spent = {"input_tokens": 2000, "output_tokens": 1}
        task = next(str(m.content) for m in request.messages if m.role == "user")
        if request.messages[-1].role == "tool" or task.count("/") >= 4:
            return {"text": "ok", "usage": spent}
        calls = [{"name": "delegate", "arguments": {"task": f"{task}/{i}"}} for i in range(3)]
        return {"tool_calls": calls, "usage": spent}

    agent = Agent(
        FunctionModel(turn, keep_calls=False),
        limits=Limits(token_budget=10_000),
        trace_dir=False,
    )
    agent.tools.append(agent.as_tool("delegate", "Delegate part of the task."))
    result = agent.run_sync("root")

    assert result.stop_reason == "token_budget"
    assert 10_000 < result.usage.total_tokens <= 10_000 + 2_001


def test_parallel_children_share_the_parents_cost_budget() -> None:
    def child_turn(request: ModelRequest) -> dict[str, Any]:
        return {
            "text": "report",
            "usage": {"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.4},
        }

    child = Agent(FunctionModel(child_turn, keep_calls=False), trace_dir=False)
    priced = {"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.01}
    parent = Agent(
        fan_out(10, usage=priced),
        tools=[child.as_tool("helper", "A helper.")],
        limits=Limits(cost_budget=1.0, token_budget=None),
        trace_dir=False,
    )
    result = parent.run_sync("go")

    assert result.stop_reason == "token_budget"  # the budget stop reason
    assert budget_guards(result)[-1] == "cost_budget"
    assert result.usage.cost_usd is not None
    assert 1.0 < result.usage.cost_usd <= 1.0 + 0.4 + 1e-9  # before: $4.01
    refused = [r for r in children(result) if r.usage.total_tokens == 0]
    assert len(refused) == 7 and all(r.stop_reason == "token_budget" for r in refused)


def test_an_agent_delegating_to_itself_stops_eight_levels_down_with_a_tool_error() -> None:
    # before: ~90 levels, until a RecursionError ended the deepest child as model_error
    delegations: list[str] = []
    refusals: list[str] = []

    def turn(request: ModelRequest) -> dict[str, Any]:
        last = request.messages[-1]
        if last.role == "tool":
            if "could not start" in str(last.content):
                refusals.append(str(last.content))
            return {"text": "done"}
        delegations.append(str(last.content))
        return {"tool_calls": [{"name": "delegate", "arguments": {"task": "delegate again"}}]}

    agent = Agent(FunctionModel(turn, keep_calls=False), trace_dir=False)
    agent.tools.append(agent.as_tool("delegate", "Delegate a task to a helper agent."))
    result = agent.run_sync("start")

    assert result.status == "completed"
    assert len(delegations) == 9  # the run and eight levels of sub-agents below it
    (refusal,) = refusals  # read by the model of the eighth level
    assert "subagent_failed" in refusal
    assert "nest at most 8 levels deep" in refusal and "level 9" in refusal
    (child,) = children(result)
    assert child.status == "completed"


@pytest.mark.parametrize("where", ["async tool", "sync tool's thread"])
def test_a_tool_running_an_agent_itself_is_held_to_the_same_depth(where: str) -> None:
    # a sync tool runs on a thread of its own: the run it starts there (`run_sync`, a
    # loop of its own) must still see which call it is inside, or it nests unbounded
    runs: list[str] = []
    refusals: list[str] = []
    agent: Agent

    @tool
    async def deeper(task: str) -> str:
        """Hand the task to another run."""
        result = await agent.run(task)
        return str(result.output)

    @tool(name="deeper")
    def deeper_in_thread(task: str) -> str:
        """Hand the task to another run, from this tool's own thread."""
        return str(agent.run_sync(task).output)

    def turn(request: ModelRequest) -> dict[str, Any]:
        last = request.messages[-1]
        if last.role == "tool":
            if "nest at most 8 levels deep" in str(last.content):
                refusals.append(str(last.content))
            return {"text": "done"}
        runs.append(str(last.content))
        return {"tool_calls": [{"name": "deeper", "arguments": {"task": "again"}}]}

    chosen = deeper if where == "async tool" else deeper_in_thread
    agent = Agent(FunctionModel(turn, keep_calls=False), tools=[chosen], trace_dir=False)
    result = agent.run_sync("start")

    assert result.status == "completed"
    assert len(runs) == 9
    (refusal,) = refusals  # the tool's error, read by the eighth level's model
    assert "level 9" in refusal


@pytest.mark.parametrize("fan", [1, 3])
def test_children_within_the_budget_are_not_stopped(fan: int) -> None:
    def child_turn(request: ModelRequest) -> dict[str, Any]:
        return {"text": "report", "usage": {"input_tokens": 100, "output_tokens": 1}}

    child = Agent(FunctionModel(child_turn, keep_calls=False), trace_dir=False)
    parent = Agent(
        fan_out(fan),
        tools=[child.as_tool("helper", "A helper.")],
        limits=Limits(token_budget=10_000),
        trace_dir=False,
    )
    result = parent.run_sync("go")

    assert result.stop_reason == "final_answer"
    assert all(r.status == "completed" for r in children(result))
    assert result.usage.total_tokens == 210 + 101 * fan
