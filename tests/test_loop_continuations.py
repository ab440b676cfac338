"""Guards cover one user request across all its continuations.

A durable session answers a request over several runs: a background call ends a run
`awaiting`, the job's result is delivered into the conversation, and `Agent.run(None,
history=...)` continues. Each story below plays that cycle by hand (a fake launcher, the
delivery appended to the history) and checks the guards saw the whole request.
"""

from __future__ import annotations

from typing import Any

import pytest

from pi_runtime import (
    Agent,
    Limits,
    RunResult,
    ToolCall,
    ToolResultMessage,
    UserError,
    UserMessage,
    tool,
)
from pi_runtime.contract import OutputContract
from pi_runtime.models import ModelRequest
from pi_runtime.testing import FunctionModel
from pi_runtime.tools import ToolSpec


@tool(background=True)
def status(service: str) -> str:
    """Check a service (slow: runs as a background job)."""
    return f"{service}: busy"


class FakeJobs:
    """A launcher that records every job it starts."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    async def __call__(
        self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any], key: str | None
    ) -> str:
        self.started.append(arguments)
        return f"job-{len(self.started)}"


def deliver(result: RunResult, content: str, *, error: bool = False) -> list[Any]:
    """The conversation after a worker delivered every awaited job's result."""
    return [
        *result.messages,
        *(
            ToolResultMessage(tool_call_id=c, name="status", content=content, is_error=error)
            for c, _ in result.waits
        ),
    ]


def play(
    agent: Agent, jobs: FakeJobs, *, content: str = "db: busy", error: bool = False, runs: int = 9
) -> list[RunResult]:
    """The request and its continuations, until one does not await (at most `runs`)."""
    results = [agent.run_sync("is the db up?", session_id="s", launcher=jobs)]
    while results[-1].status == "awaiting" and len(results) < runs:
        history = deliver(results[-1], content, error=error)
        results.append(agent.run_sync(None, history=history, session_id="s", launcher=jobs))
    return results


def always_checks(service: str | None = None) -> FunctionModel:
    """A model that calls `status` every time (the same service, or a new one each step)."""

    def reply(request: ModelRequest) -> dict[str, Any]:
        name = service or f"svc{request.step}"
        return {"tool_calls": [{"name": "status", "arguments": {"service": name}}]}

    return FunctionModel(reply)


@pytest.mark.parametrize("block_repeated_calls", [True, False])
def test_identical_background_calls_stop_on_a_guard_within_four_jobs(
    block_repeated_calls: bool,
) -> None:
    jobs = FakeJobs()
    limits = Limits(block_repeated_calls=block_repeated_calls)
    agent = Agent(always_checks("db"), tools=[status], limits=limits, trace_dir=False)

    results = play(agent, jobs)

    last = results[-1]
    assert last.status == "stopped", [(r.status, r.stop_reason) for r in results]
    assert last.stop_reason in {"loop_detected", "no_progress"}
    assert len(jobs.started) <= 4


def test_a_continuation_stops_at_once_when_the_request_used_its_steps() -> None:
    jobs = FakeJobs()
    model = always_checks()
    agent = Agent(model, tools=[status], limits=Limits(max_steps=2), trace_dir=False)

    results = play(agent, jobs)

    assert [r.status for r in results] == ["awaiting", "awaiting", "stopped"]
    assert results[-1].stop_reason == "max_steps"
    assert [r.steps for r in results] == [1, 1, 0]  # each run counts its own calls
    assert len(jobs.started) == 2


def test_the_token_budget_covers_the_whole_request() -> None:
    def reply(request: ModelRequest) -> dict[str, Any]:
        call = {"name": "status", "arguments": {"service": f"svc{request.step}"}}
        return {"tool_calls": [call], "usage": {"input_tokens": 600, "output_tokens": 10}}

    jobs = FakeJobs()
    limits = Limits(token_budget=1_000)
    agent = Agent(FunctionModel(reply), tools=[status], limits=limits, trace_dir=False)

    results = play(agent, jobs)

    assert results[-1].stop_reason == "token_budget"
    assert len(jobs.started) == 2


def test_failed_results_delivered_in_a_row_stop_the_request() -> None:
    jobs = FakeJobs()
    agent = Agent(always_checks(), tools=[status], trace_dir=False)

    results = play(agent, jobs, content='{"kind": "timeout"}', error=True)

    assert results[-1].stop_reason == "consecutive_errors"
    assert len(jobs.started) == 3  # max_consecutive_errors


def test_the_wall_clock_counts_the_time_earlier_runs_took() -> None:
    jobs = FakeJobs()
    model = always_checks()
    agent = Agent(model, tools=[status], limits=Limits(wall_clock_s=60), trace_dir=False)
    first = agent.run_sync("is the db up?", session_id="s", launcher=jobs)

    later = agent.run_sync(
        None,
        history=deliver(first, "db: busy"),
        session_id="s",
        launcher=jobs,
        request_elapsed_s=61.0,
    )

    assert (later.status, later.stop_reason, later.steps) == ("stopped", "wall_clock", 0)
    assert len(jobs.started) == 1


@pytest.mark.parametrize("elapsed", [-1.0, float("nan"), float("inf"), "5"])
def test_a_bad_request_elapsed_is_misuse(elapsed: Any) -> None:
    agent = Agent(always_checks(), tools=[status], trace_dir=False)
    history = [UserMessage(content="go")]
    with pytest.raises(UserError, match="request_elapsed_s"):
        agent.run_sync(None, history=history, request_elapsed_s=elapsed)


def test_request_elapsed_belongs_to_continuations_only() -> None:
    agent = Agent(always_checks(), tools=[status], trace_dir=False)
    with pytest.raises(UserError, match="continuations"):
        agent.run_sync("a new request", request_elapsed_s=3.0)


def test_a_new_prompt_starts_a_new_request_with_fresh_guards() -> None:
    jobs = FakeJobs()
    agent = Agent(always_checks(), tools=[status], limits=Limits(max_steps=2), trace_dir=False)
    tripped = play(agent, jobs)[-1]
    assert tripped.stop_reason == "max_steps"

    again = agent.run_sync("and the cache?", history=tripped.messages, launcher=jobs)

    assert (again.status, again.steps) == ("awaiting", 1)


def test_contract_repairs_are_counted_across_continuations_and_never_become_the_request() -> None:
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> dict[str, Any]:
        requests.append(request)
        if request.step == 1:  # after the first repair: go and look it up
            return {"tool_calls": [{"name": "status", "arguments": {"service": "db"}}]}
        return {"text": "it is busy"}  # never the JSON the contract wants

    model = FunctionModel(reply)
    schema = {"type": "object", "properties": {"up": {"type": "boolean"}}, "required": ["up"]}
    contract = OutputContract.from_schema(schema, name="Health", max_repairs=1)
    agent = Agent(model, tools=[status], output=contract, trace_dir=False)

    results = play(agent, FakeJobs())

    assert [r.status for r in results] == ["awaiting", "failed"]
    assert results[-1].stop_reason == "contract_violation"
    assert results[-1].steps == 1  # the spent repair was not granted again
    repairs = [
        m
        for m in results[-1].messages
        if isinstance(m, UserMessage) and m.origin == "contract_repair"
    ]
    assert len(repairs) == 1
    # the continuation's context still treats the question as the current user message:
    # the runtime block sits in front of it, not in front of the repair turn
    sent = requests[-1].messages
    question = next(m for m in sent if isinstance(m, UserMessage))
    assert question.content.endswith("is the db up?") and question.content != "is the db up?"
    assert any(m == repairs[0] for m in sent)
