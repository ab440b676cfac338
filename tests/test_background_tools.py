"""Background tools: with a launcher a call becomes a job and the run ends `awaiting`;
the delivered result lets a continuation run pick up where the conversation stands."""

from __future__ import annotations

from typing import Any

from pi_runtime import Agent, ToolCall, ToolResultMessage, tool
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import ToolSpec

RAN: list[int] = []


@tool(background=True, idempotent=False)
def backtest(days: int, idempotency_key: str) -> str:
    """Run a long backtest."""
    RAN.append(days)
    return f"backtest over {days} days: +3.2%"


@tool
def quote(symbol: str) -> str:
    """Latest quote."""
    return f"{symbol} 101.5"


SCRIPT = [
    {
        "tool_calls": [
            {"name": "quote", "arguments": {"symbol": "ACME"}},
            {"name": "backtest", "arguments": {"days": 30}},
        ]
    },
    {"text": "Backtest done: +3.2% over 30 days; ACME trades at 101.5."},
]


def test_background_call_starts_a_job_and_the_run_awaits_it() -> None:
    started: list[tuple[str, dict[str, Any], str | None]] = []

    async def launcher(
        call: ToolCall, spec: ToolSpec, arguments: dict[str, Any], key: str | None
    ) -> str:
        started.append((call.id, arguments, key))
        return "job-1"

    RAN.clear()
    agent = Agent(ScriptedModel(SCRIPT), tools=[backtest, quote], trace_dir=False)
    result = agent.run_sync("backtest ACME", session_id="s1", launcher=launcher)

    assert (result.status, result.stop_reason, result.output) == ("awaiting", "awaiting_tool", None)
    assert RAN == []  # the job runs elsewhere, never inline
    assert started == [("call_0_1", {"days": 30}, started[0][2])] and started[0][2]
    assert result.waits == (("call_0_1", "job-1"),)
    assert result.to_dict()["waits"] == [{"tool_call_id": "call_0_1", "job_id": "job-1"}]
    # the other call of the batch ran and has its result; the job's call has none yet
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["call_0_0"]
    assert any(e.kind == "job_started" for e in result.events)

    # the worker's delivery: the job's result under the original tool_call_id
    delivered = (
        *result.messages,
        ToolResultMessage(
            tool_call_id="call_0_1", name="backtest", content="backtest over 30 days: +3.2%"
        ),
    )
    resumed = agent.run_sync(None, history=delivered, session_id="s1")
    assert (resumed.status, resumed.output) == ("completed", SCRIPT[1]["text"])


def test_without_a_launcher_background_tools_run_inline() -> None:
    RAN.clear()
    agent = Agent(ScriptedModel(SCRIPT), tools=[backtest, quote], trace_dir=False)
    result = agent.run_sync("backtest ACME")
    assert (result.status, RAN) == ("completed", [30])


def test_a_run_without_prompt_or_history_is_misuse() -> None:
    import pytest

    from pi_runtime import UserError

    with pytest.raises(UserError, match="prompt or a conversation"):
        Agent(ScriptedModel(SCRIPT), trace_dir=False).run_sync(None)
