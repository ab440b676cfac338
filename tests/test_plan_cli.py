"""Modes from the command line and agent files: `pi run --mode`, `mode = "plan"`, the plan
in `pi trace show`, the plan example's eval suite, and a plan-mode session whose step
waits for a background job finished by a worker in another process."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cli_support import agent_folder as cli_agent_folder
from cli_support import pi as cli_pi
from durable_support import *  # noqa: F403
from pi_runtime.testing import function_call, plan_answer, reflection_answer, text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plan"
TRIP = "我 12 月 5 日去北京出差，6 日去上海。查一下两地天气，哪天下雨就提醒我带伞。"

TOOLS = '''\
import os
from pathlib import Path

from pi_runtime import tool


@tool
def lookup(key: str) -> dict:
    """Look a key up."""
    return {"key": key, "value": 42}


@tool(background=True)
def slow_lookup(key: str) -> dict:
    """Look a key up slowly, in the background."""
    log = os.environ.get("PLAN_TOOLS_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(f"slow_lookup {key}\\n")
    return {"key": key, "value": 7}


TOOLS = [lookup, slow_lookup]
'''


def agent_folder(tmp: Path, steps: list[Any], extra: str = "") -> Path:
    agent = 'model = "scripted:script.json"\ntools = ["{module}:TOOLS"]\n'
    return cli_agent_folder(tmp, "plantools", TOOLS, steps, agent + extra)


pi = partial(cli_pi, log="PLAN_TOOLS_LOG")


ONE_STEP = [
    plan_answer(("look k1 up", ["lookup"])),
    function_call("lookup", {"key": "k1"}),
    text("k1 is 42."),
    reflection_answer(True, "found it"),
    text("The value of k1 is 42."),
]


def test_the_plan_example_runs_offline_from_the_console_script(tmp_path: Path) -> None:
    ran = pi("run", TRIP, "--agent", str(EXAMPLE / "agent.toml"), "--json", tmp=tmp_path,
             process=True)  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "completed" and result["steps"] == 15
    assert result["output"].startswith("## 摘要\n")
    for heading in ("## 详情", "## 行动项"):
        assert heading in result["output"]


def test_pi_trace_show_draws_the_plan_its_steps_and_the_replan(tmp_path: Path) -> None:
    ran = pi("run", TRIP, "--agent", str(EXAMPLE / "agent.toml"), "--json", tmp=tmp_path)
    trace = json.loads(ran.stdout)["trace"]

    shown = pi("trace", "show", trace, tmp=tmp_path)

    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "plan: 3 step(s): 1. 查询北京 2026-12-05 的天气 [get_weather]" in out
    assert "step 1/3: 查询北京 2026-12-05 的天气 · tools get_weather" in out
    assert "step 1: answered in 2 call(s) · not done, replan · 城市名要写中文" in out
    assert "after step 1 (replan 1 of 2): 城市名要写中文" in out
    assert "revision 1: 3 step(s)" in out
    assert "prompt planner@1" in out and "prompt reflector@1" in out
    assert "prompt executor@1" in out


def test_model_written_goals_cannot_drive_the_terminal(tmp_path: Path) -> None:
    hostile = "look \x1b[2J\x1b]0;pwned\x07k1 up"
    steps = [plan_answer((hostile, ["lookup"])), *ONE_STEP[1:]]
    agent = agent_folder(tmp_path, steps, 'mode = "plan"\n')
    ran = pi("run", "k1?", "--agent", str(agent), "--json", tmp=tmp_path)
    assert ran.returncode == 0, ran.stderr

    shown = pi("trace", "show", json.loads(ran.stdout)["trace"], tmp=tmp_path)
    progress = pi("run", "k1?", "--agent", str(agent), tmp=tmp_path)

    for out in (shown.stdout, progress.stderr):
        assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\x07" not in out
    assert "step 1/1: look" in progress.stderr


def test_the_plan_examples_eval_suite_passes_with_its_scripted_model(tmp_path: Path) -> None:
    ran = pi("eval", str(EXAMPLE / "suite.toml"), "--json", tmp=tmp_path)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert [(r["case"], r["passed"]) for r in report["rows"]] == [
        ("trip-replanned", True),
        ("dry-one-step", True),
    ]
    assert [r["tool_calls"] for r in report["rows"]] == [
        ["get_weather", "get_weather", "get_weather", "create_reminder"],
        ["get_weather"],
    ]


def test_mode_flag_turns_a_react_agent_file_into_a_planner(tmp_path: Path) -> None:
    agent = agent_folder(tmp_path, ONE_STEP)

    ran = pi("run", "k1?", "--agent", str(agent), "--mode", "plan", "--json", tmp=tmp_path)

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["output"] == "The value of k1 is 42." and result["steps"] == 5
    origins = [m.get("origin") for m in result["messages"] if m["role"] == "user"]
    assert origins == [None, "plan", "plan", "plan"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('mode = "plans"', "mode: must be one of react, plan, auto, got 'plans'"),
        ("max_replans = -1", "max_replans: must be an integer from 0 to 100, got -1"),
        ('max_replans = "2"', "max_replans: must be an integer from 0 to 100, got '2'"),
        ("max_replans = 101", "max_replans: must be an integer from 0 to 100, got 101"),
        ("step_max_steps = 0", "step_max_steps: must be an integer from 1 to 1000, got 0"),
        ("step_max_steps = 1001", "step_max_steps: must be an integer from 1 to 1000, got 1001"),
    ],
)
def test_a_bad_mode_key_in_an_agent_file_names_its_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    agent = agent_folder(tmp_path, ONE_STEP, f"{line}\n")

    ran = pi("run", "k1?", "--agent", str(agent), tmp=tmp_path)

    assert ran.returncode == 2
    assert f"agent.toml:3: {problem}" in ran.stderr


def test_a_bad_mode_flag_is_bad_usage(tmp_path: Path) -> None:
    agent = agent_folder(tmp_path, ONE_STEP)

    ran = pi("run", "k1?", "--agent", str(agent), "--mode", "Plan", tmp=tmp_path)

    assert ran.returncode == 2 and "mode: must be one of react, plan, auto" in ran.stderr
    assert not (tmp_path / "traces").exists()  # refused before any run


def test_a_plan_step_waiting_for_a_job_is_continued_by_a_worker(
    db_url: str, tmp_path: Path
) -> None:
    steps = [
        plan_answer(("look k1 up slowly", ["slow_lookup"])),
        function_call("slow_lookup", {"key": "k1"}),
        text("k1 is 7."),  # the continuation, after the worker delivered the result
    ]
    agent = agent_folder(tmp_path, steps, 'mode = "plan"\n')

    ran = pi("run", "k1?", "--agent", str(agent), "--session", "p1", "--db", db_url, "--json",
             tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr  # the step's call became a job
    first = json.loads(ran.stdout)
    assert (first["status"], first["stop_reason"]) == ("awaiting", "awaiting_tool")
    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
       process=True, expect=0)  # fmt: skip

    shown = pi("session", "show", "p1", "--db", db_url, "--json", tmp=tmp_path)
    view = json.loads(shown.stdout)
    assert view["status"] == "completed"
    assert view["messages"][-1]["content"][0]["text"] == "k1 is 7."
    assert (tmp_path / "executions.log").read_text(encoding="utf-8") == "slow_lookup k1\n"
    # the session keeps its agent, mode included
    again = pi("run", "more?", "--session", "p1", "--db", db_url, "--mode", "react",
               tmp=tmp_path)  # fmt: skip
    assert again.returncode == 2 and "a session keeps its agent" in again.stderr
