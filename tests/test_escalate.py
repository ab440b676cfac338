"""The `escalate` hook (seed 001 §2.1): told when a run ends `stopped` or `failed`, never
when it completes or awaits; what it returns is kept in the trace and the `RunResult`,
and a hook that fails is recorded without changing how the run ended."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import (
    Agent,
    Deny,
    EscalationContext,
    Guardrails,
    Limits,
    RunResult,
    ToolCall,
    ToolSpec,
    UserError,
    tool,
)
from pi_runtime.loop import escalation
from pi_runtime.observe import read_trace
from pi_runtime.testing import ScriptedModel

TOLD: list[EscalationContext] = []


def page_oncall(context: EscalationContext) -> dict[str, Any]:
    TOLD.append(context)
    return {"ticket": f"T-{len(TOLD)}", "reason": context.stop_reason}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "nothing"


@tool(background=True)
def backtest(days: int) -> str:
    """Backtest a strategy (slow)."""
    return "ok"


LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]}


def run(steps: list[dict[str, Any]], hook: Any = page_oncall, **options: Any) -> RunResult:
    TOLD.clear()
    agent = Agent(ScriptedModel(steps), tools=[lookup, backtest], escalate=hook, **options)
    return agent.run_sync("look k up")


def escalated(result: RunResult) -> list[Any]:
    return [e for e in result.events if e.kind == "escalated"]


def test_a_run_stopped_by_a_guard_is_escalated_with_its_state_and_messages(
    tmp_path: Path,
) -> None:
    result = run([LOOKUP] * 5, limits=Limits(max_steps=2), trace_dir=tmp_path)

    assert (result.status, result.stop_reason) == ("stopped", "max_steps")
    [context] = TOLD
    assert (context.status, context.stop_reason, context.steps) == ("stopped", "max_steps", 2)
    assert context.detail == result.error and context.messages == result.messages
    assert context.run_id == result.run_id and context.session_id == result.session_id
    assert result.escalation is not None
    assert result.escalation.value == {"ticket": "T-1", "reason": "max_steps"}
    assert result.to_dict()["escalation"] == {
        "hook": "page_oncall",
        "value": {"ticket": "T-1", "reason": "max_steps"},
        "error": None,
    }
    # in the trace, just before the run's last line
    lines = read_trace(result.trace or "")
    assert [line["kind"] for line in lines[-2:]] == ["escalated", "run_finished"]
    assert lines[-2]["value"] == {"ticket": "T-1", "reason": "max_steps"}


def test_a_failed_run_is_escalated() -> None:
    result = run([LOOKUP], trace_dir=False)  # the script ends: the next call is a model error

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert [c.stop_reason for c in TOLD] == ["model_error"]


def test_a_run_a_guardrail_refused_is_escalated() -> None:
    guardrails = Guardrails(input=[lambda text: Deny("off limits")])
    result = run([{"text": "x"}], guardrails=guardrails, trace_dir=False)

    assert result.stop_reason == "security"
    assert [c.stop_reason for c in TOLD] == ["security"]
    assert TOLD[0].detail is not None and "off limits" in TOLD[0].detail


def test_a_completed_run_is_not_escalated() -> None:
    result = run([LOOKUP, {"text": "done"}], trace_dir=False)

    assert result.status == "completed"
    assert TOLD == [] and result.escalation is None and escalated(result) == []
    assert result.to_dict()["escalation"] is None


def test_an_awaiting_run_is_not_escalated() -> None:
    async def launcher(
        call: ToolCall, spec: ToolSpec, args: dict[str, Any], key: str | None
    ) -> str:
        return "job-1"

    TOLD.clear()
    agent = Agent(
        ScriptedModel([{"tool_calls": [{"name": "backtest", "arguments": {"days": 3}}]}]),
        tools=[backtest],
        escalate=page_oncall,
        trace_dir=False,
    )
    result = agent.run_sync("backtest", launcher=launcher)

    assert result.status == "awaiting"
    assert TOLD == [] and result.escalation is None


def test_a_hook_that_raises_is_recorded_and_the_run_ends_as_it_would_have() -> None:
    def broken(context: EscalationContext) -> None:
        raise ConnectionError("pager unreachable")

    result = run([LOOKUP] * 5, hook=broken, limits=Limits(max_steps=1), trace_dir=False)

    assert (result.status, result.stop_reason) == ("stopped", "max_steps")
    assert result.escalation is not None and result.escalation.value is None
    assert result.escalation.error == "the hook raised ConnectionError: pager unreachable"
    [event] = escalated(result)
    assert event.error == result.escalation.error


def test_an_async_hook_is_awaited() -> None:
    async def ticket(context: EscalationContext) -> str:
        await asyncio.sleep(0)
        return f"ticket for {context.stop_reason}"

    result = run([LOOKUP] * 5, hook=ticket, limits=Limits(max_steps=1), trace_dir=False)

    assert result.escalation is not None
    assert result.escalation.value == "ticket for max_steps"


def test_a_plain_hook_runs_off_the_event_loop() -> None:
    threads: list[str] = []

    def note(context: EscalationContext) -> None:
        threads.append(threading.current_thread().name)

    run([LOOKUP] * 5, hook=note, limits=Limits(max_steps=1), trace_dir=False)

    assert threads and threads[0] != threading.main_thread().name


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1, 2}, "set, which is not JSON"),
        (float("nan"), "not JSON"),
        ("x" * 10_000, "bytes of JSON; at most 8192 are kept"),
    ],
    ids=["set", "nan", "too-large"],
)
def test_a_value_that_cannot_be_kept_is_recorded_as_an_error(value: Any, words: str) -> None:
    result = run([LOOKUP] * 5, hook=lambda c: value, limits=Limits(max_steps=1), trace_dir=False)

    assert result.escalation is not None and result.escalation.value is None
    assert words in (result.escalation.error or "")
    json.dumps(result.to_dict())  # the RunResult stays JSON


def test_a_hook_that_hangs_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(escalation, "ESCALATE_TIMEOUT_S", 0.05)

    async def hang(context: EscalationContext) -> None:
        await asyncio.Event().wait()

    result = run([LOOKUP] * 5, hook=hang, limits=Limits(max_steps=1), trace_dir=False)

    assert result.stop_reason == "max_steps"
    assert result.escalation is not None
    assert result.escalation.error == "the hook did not return within 0.05s"


def test_secrets_in_what_the_hook_returns_are_redacted(tmp_path: Path) -> None:
    key = "sk-" + "Z9y8X7w6" * 4
    result = run(
        [LOOKUP] * 5,
        hook=lambda c: {"note": f"used {key}"},
        limits=Limits(max_steps=1),
        trace_dir=tmp_path,
    )

    assert result.escalation is not None
    assert result.escalation.value == {"note": "used sk-…[redacted]"}
    assert key not in Path(result.trace or "").read_text(encoding="utf-8")


def test_escalate_must_be_callable() -> None:
    with pytest.raises(UserError, match="escalate must be a callable"):
        Agent(ScriptedModel([]), escalate="pager:page")  # type: ignore[arg-type]
