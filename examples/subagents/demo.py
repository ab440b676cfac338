"""Sub-agents from Python, offline: the crew of `agent.toml` built with `Agent.as_tool`.

    python -m examples.subagents.demo

Two runs of the coordinator, on scripted models:

1. both sub-agents report; the coordinator answers. The usage table shows the
   coordinator's own tokens, each child's, and the total its `RunResult.usage` holds.
2. the forecaster's model fails mid-task: the coordinator reads a `subagent_failed`
   tool error naming the child's stop reason, and still answers with what it has.

Traces go to `$PI_TRACE_DIR` (default `./.pi/traces`); each child's trace names the
coordinator's run as its `parent_run_id`.
"""

from __future__ import annotations

import sys

from pi_runtime import Agent, Limits, RunResult, ToolResultMessage
from pi_runtime.observe import ChildRun
from pi_runtime.testing import ScriptedModel, function_call, parallel_calls, text

from .tools import FORECAST_TOOLS, TIDE_TOOLS

QUESTION = "Can we sail from Brest to Camaret tomorrow morning?"


def crew(*, forecaster_breaks: bool = False) -> Agent:
    """The coordinator, with the tide reader and the forecaster as its tools."""
    tides = Agent(
        ScriptedModel(
            [
                function_call("tide_table", {"port": "Brest"}, usage=_u(310, 30)),
                text("Brest: high 06:10 and 18:32, low 12:21. Coefficient 92.", usage=_u(420, 52)),
            ]
        ),
        tools=TIDE_TOOLS,
        instructions="You read tide tables.",
        limits=Limits(max_steps=4),
    )
    forecast_steps = [function_call("marine_forecast", {"area": "Iroise"}, usage=_u(290, 18))]
    if not forecaster_breaks:  # else its script ends: the next model call fails
        forecast_steps.append(
            text("Iroise: W 3-4 Bft, slight sea, gusts 18 kn.", usage=_u(360, 27))
        )
    forecast = Agent(
        ScriptedModel(forecast_steps),
        tools=FORECAST_TOOLS,
        instructions="You read marine forecasts.",
        limits=Limits(max_steps=4, model_retries=0),
    )
    answer = (
        "Tides suit a 06:00 start, but I have no forecast: check it before you leave."
        if forecaster_breaks
        else "Yes: leave Brest around 06:00 (high water 06:10); W 3-4, gusts to 18 kn."
    )
    coordinator = ScriptedModel(
        [
            parallel_calls(
                function_call("tides", {"task": "Tomorrow's high and low water at Brest."}),
                function_call("forecast", {"task": "Tomorrow morning's forecast for Iroise."}),
                usage=_u(420, 64),
            ),
            text(answer, usage=_u(610, 71)),
        ]
    )
    return Agent(
        coordinator,
        tools=[
            tides.as_tool("tides", "Reads tide tables of Breton ports."),
            forecast.as_tool("forecast", "Reads the marine forecast of a sea area."),
        ],
        instructions="You plan short sailing trips. Ask your crew for facts.",
        limits=Limits(max_steps=6, token_budget=20_000, wall_clock_s=120),
    )


def _u(i: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o}


def report(title: str, result: RunResult) -> None:
    print(f"== {title}")
    print(f"answer: {result.output}")
    for message in result.messages:
        if isinstance(message, ToolResultMessage) and message.error is not None:
            print(f"tool error from {message.name}: {message.error.kind}: {message.error.message}")
    children = [e for e in result.events if isinstance(e, ChildRun)]
    own = result.usage.total_tokens - sum(c.usage.total_tokens for c in children)
    print(f"{'run':<28} {'status':<10} {'tokens':>7}")
    print(f"{'coordinator (own calls)':<28} {result.status:<10} {own:>7}")
    for child in children:
        label = f"{child.name} ({child.stop_reason})"
        print(f"{label:<28} {child.status or '-':<10} {child.usage.total_tokens:>7}")
    print(f"{'total in RunResult.usage':<28} {'':<10} {result.usage.total_tokens:>7}")
    print(f"trace: {result.trace}\n")


def main() -> int:
    good = crew().run_sync(QUESTION)
    report("both sub-agents report", good)
    broken = crew(forecaster_breaks=True).run_sync(QUESTION)
    report("the forecaster fails", broken)
    return 0 if good.ok and broken.ok else 1


if __name__ == "__main__":
    sys.exit(main())
