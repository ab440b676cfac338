"""`pi eval`: run a suite of cases against one or more models and score every run.

A suite (`suite.py`) names an agent file and its cases; each case runs on a fresh agent
(`runner.py`), is scored against what it expects (`score.py`), and the rows, a summary
per model and the files go out through `report.py`. The shape of `evaluate`'s result is
what `pi eval --json` prints: `{"suite", "rows": [...], "summary": {MODEL: {...}}}`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .runner import EvalRunner, ModelUnderTest, all_passed, models_under_test, summarize
from .score import arguments_match, score
from .suite import Case, ExpectedCall, Suite, SuiteError, load_suite


async def evaluate(
    suite: Suite,
    models: list[ModelUnderTest],
    *,
    repeat: int = 1,
    trace_dir: Path | bool | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run every case of `suite` on every model `repeat` times: the eval's result."""
    runner = EvalRunner(suite, trace_dir=trace_dir)
    runner.check(models)
    rows = await runner.run(models, repeat=repeat, on_row=on_row)
    return {
        "suite": suite.name,
        "file": str(suite.path),
        "repeat": repeat,
        "models": [m.label for m in models],
        "rows": rows,
        "summary": summarize(rows),
        "passed": all_passed(rows),
    }


__all__ = [
    "Case",
    "EvalRunner",
    "ExpectedCall",
    "ModelUnderTest",
    "Suite",
    "SuiteError",
    "all_passed",
    "arguments_match",
    "evaluate",
    "load_suite",
    "models_under_test",
    "score",
    "summarize",
]
