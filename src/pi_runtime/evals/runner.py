"""Running a suite: every case, on every model, `repeat` times, each run a fresh agent.

A case's run starts from nothing: a new agent built from the suite's agent definition
(with the model under test), a new conversation. A scripted model therefore starts its
script over for each case (its step is the number of assistant messages so far). A
case's own `script` stands in for the agent file's scripted model — used when the model
under test is that very model, ignored for any other. Costly models (the embedded one)
are loaded once and shared by the runs, as `pi run` sessions share them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from ..exceptions import UserError
from ..loop import Agent, RunResult
from ..loop.agentfile import agent_error
from ..loop.definition import PATH_SPECS, AgentDefinition, DefinitionError, absolute_model
from ..memory import LocalMemoryStore
from ..models import Model
from .score import calls_made, score
from .suite import Case, Suite

PREAMBLE_METRICS = (
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
)
"""Seed 000's four metrics, as every run reports them (and `pi bench preamble` shows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUnderTest:
    """A model to evaluate: the spec runs use, and the label tables and files show."""

    label: str
    spec: str | None


def models_under_test(suite: Suite, specs: list[str], cwd: Path) -> list[ModelUnderTest]:
    """The `--model` specs (paths made absolute against `cwd`), or the agent's own model.

    Raises UserError for a spec given twice."""
    if not specs:
        return [ModelUnderTest(label=_label(suite.agent.model, suite.path.parent), spec=None)]
    if len(set(specs)) != len(specs):
        twice = next(s for s in specs if specs.count(s) > 1)
        raise UserError(f"--model {twice} is given twice")
    return [ModelUnderTest(label=s, spec=absolute_model(s, cwd)) for s in specs]


def _label(spec: str | None, base: Path) -> str:
    """A short name for the agent file's model: its path relative to the suite."""
    if spec is None:
        return "local"
    prefix, _, rest = spec.partition(":")
    if prefix in PATH_SPECS and rest:
        path = Path(rest)
        try:
            return f"{prefix}:{path.relative_to(base.resolve())}"
        except ValueError:
            return f"{prefix}:{path.name}"
    return spec


class EvalRunner:
    """Builds each case's agent and runs it; `check` builds one per model up front, so a
    model that cannot be made (no API key, a missing script) is found before any run."""

    def __init__(self, suite: Suite, *, trace_dir: Path | bool | None = None) -> None:
        self.suite = suite
        self.trace_dir = trace_dir
        self.cache: dict[str, Model] = {}

    def definition(self, model: ModelUnderTest, case: Case) -> AgentDefinition:
        agent = self.suite.agent
        spec = model.spec
        own = spec is None or spec == agent.model
        if own and case.script is not None and (agent.model or "").startswith("scripted:"):
            spec = f"scripted:{case.script}"
        return agent.with_overrides(model=spec)

    def build(self, model: ModelUnderTest, case: Case) -> Agent:
        definition = self.definition(model, case)
        try:
            # a case starts from nothing: long-term memory included
            return definition.build_agent(
                trace_dir=self.trace_dir, models=self.cache, memory_store=LocalMemoryStore()
            )
        except DefinitionError as exc:
            raise agent_error(definition, exc) from None

    def check(self, models: list[ModelUnderTest]) -> None:
        for model in models:
            for case in self.suite.cases:
                self.build(model, case)

    async def run(
        self,
        models: list[ModelUnderTest],
        *,
        repeat: int = 1,
        on_row: Callable[[dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """One row per case × model × attempt, in that order within each model."""
        rows = []
        try:
            for model in models:
                for case in self.suite.cases:
                    for attempt in range(1, repeat + 1):
                        row = await self._run_case(model, case, attempt)
                        rows.append(row)
                        if on_row is not None:
                            on_row(row)
        finally:
            for cached in self.cache.values():
                await cached.aclose()
        return rows

    async def _run_case(self, model: ModelUnderTest, case: Case, attempt: int) -> dict[str, Any]:
        agent = self.build(model, case)
        result = await agent.mcp.closing(agent.run(case.prompt))  # a case's own servers
        if all(agent.model is not shared for shared in self.cache.values()):
            await agent.model.aclose()  # made for this run alone
        return row_of(case, model.label, attempt, result)


def row_of(case: Case, model: str, attempt: int, result: RunResult) -> dict[str, Any]:
    """The row of one run: what the suite checked and what the run measured."""
    failures = score(case, result)
    metrics = result.metrics
    return {
        "case": case.name,
        "model": model,
        "attempt": attempt,
        "passed": not failures,
        "failures": failures,
        "status": result.status,
        "stop_reason": result.stop_reason,
        "steps": result.steps,
        "tool_calls": [call.name for call, _ in calls_made(result)],
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cost_usd": result.usage.cost_usd,
        "wall_ms": metrics.get("wall_ms"),
        "first_token_ms": metrics.get("time_to_first_token_ms"),
        **{name: metrics.get(name) for name in PREAMBLE_METRICS},
        "trace": result.trace,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model: passed, total, success rate (over every attempt), cost and means."""
    summary: dict[str, dict[str, Any]] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        passed = sum(1 for r in mine if r["passed"])
        costs = [r["cost_usd"] for r in mine]
        summary[model] = {
            "passed": passed,
            "total": len(mine),
            "success_rate": round(passed / len(mine), 4),
            "cost_usd": None if None in costs else round(sum(costs), 8),
            "mean_steps": _mean(r["steps"] for r in mine),
            "mean_wall_ms": _mean(r["wall_ms"] for r in mine),
            "mean_first_token_ms": _mean(r["first_token_ms"] for r in mine),
            "mean_input_tokens": _mean(r["input_tokens"] for r in mine),
            "mean_output_tokens": _mean(r["output_tokens"] for r in mine),
            "mean_text_tokens_before_first_tool_call": _mean(
                r["text_tokens_before_first_tool_call"] for r in mine
            ),
        }
    return summary


def _mean(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return round(fmean(known), 3) if known else None


def all_passed(rows: list[dict[str, Any]]) -> bool:
    return bool(rows) and all(r["passed"] for r in rows)


__all__ = ["EvalRunner", "ModelUnderTest", "all_passed", "models_under_test", "summarize"]
