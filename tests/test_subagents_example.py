"""The sub-agents example: a coordinator and two sub-agents, each its own agent file,
offline on scripted models; and the same crew built in Python (`demo.py`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cli_support import pi_inprocess
from pi_runtime import ToolError
from pi_runtime.observe import read_trace

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the examples live beside the package, not inside it

from examples.subagents import demo, tools  # noqa: E402

AGENT = REPO / "examples" / "subagents" / "agent.toml"


def test_the_agent_file_crew_answers_and_counts_both_children(tmp_path: Path) -> None:
    ran = pi_inprocess(
        "run", demo.QUESTION, "--agent", str(AGENT), "--json",
        cwd=REPO, env={"PI_TRACE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert data["output"].startswith("Yes: leave Brest around 06:00")
    children = [e for e in read_trace(data["trace"]) if e["kind"] == "child_run"]
    assert sorted(c["name"] for c in children) == ["forecast", "tides"]
    own = 420 + 64 + 610 + 71
    spent = sum(c["usage"]["input_tokens"] + c["usage"]["output_tokens"] for c in children)
    usage = data["usage"]
    assert usage["input_tokens"] + usage["output_tokens"] == own + spent
    for child in children:
        started = read_trace(child["trace"])[0]
        assert started["parent_run_id"] == data["run_id"]
        assert started["limits"]["token_budget"] <= 20_000 - (420 + 64)


def test_the_demo_shows_a_failing_forecaster_as_a_tool_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PI_TRACE_DIR", str(tmp_path))
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "tool error from forecast: subagent_failed" in out
    assert "forecast (model_error)" in out
    assert out.count("total in RunResult.usage") == 2


def test_the_crews_tools_say_what_they_know() -> None:
    assert tools.tide_table.function(port=" brest ")["port"] == "Brest"
    with pytest.raises(ToolError, match="no tide table"):
        tools.tide_table.function(port="Atlantis")
    with pytest.raises(ToolError, match="no forecast"):
        tools.marine_forecast.function(area="Mars")
