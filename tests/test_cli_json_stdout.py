"""`--json` commands print exactly one JSON object on stdout, whatever else writes to it.

A tools module may print when it is imported, a tool may write to file descriptor 1
directly or run a child process that inherits it. None of that may reach the stdout of
`pi run`, `pi run --session`, `pi approve`, `pi reject` or `pi eval` with `--json`: all
of it goes to stderr. Only a real process shows what reaches file descriptor 1, so these
run the console script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import Ran, pi

NOISY_TOOLS = '''
import os, subprocess, sys
from pi_runtime import tool

print("import-time print")

def _noise() -> None:
    print("tool print")
    os.write(1, b"raw fd 1 write\\n")
    subprocess.run([sys.executable, "-c", "print('child process output')"], check=True)

@tool
def noisy(text: str) -> str:
    """Write to stdout three ways."""
    _noise()
    return text

@tool(requires_approval=True)
def gated(text: str) -> str:
    """The same noise, once a person approves it."""
    _noise()
    return text

TOOLS = [noisy, gated]
'''
NOISE = ("import-time print", "tool print", "raw fd 1 write", "child process output")


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """An agent file whose tools module is noisy at import and when a tool runs."""
    (tmp_path / "noisytools.py").write_text(NOISY_TOOLS, encoding="utf-8")
    _script(tmp_path, "noisy")
    agent = tmp_path / "agent.toml"
    agent.write_text('model = "scripted:script.json"\ntools = ["noisytools:TOOLS"]\n')
    return agent


def _script(folder: Path, tool: str) -> None:
    steps = [{"tool_calls": [{"name": tool, "arguments": {"text": "x"}}]}, {"text": "done"}]
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")


def _one_object(ran: Ran) -> dict[str, Any]:
    """The single JSON object on stdout; the noise went to stderr."""
    data = json.loads(ran.stdout)
    assert isinstance(data, dict)
    assert "import-time print" in ran.stderr
    return data


def test_run_json_stdout_holds_only_the_result(agent: Path, tmp_path: Path) -> None:
    ran = pi("run", "hi", "--agent", str(agent), "--json", tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    assert _one_object(ran)["output"] == "done"
    assert all(noise in ran.stderr for noise in NOISE)


def test_session_run_json_stdout_holds_only_the_result(agent: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    args = ("run", "hi", "--agent", str(agent), "--session", "s1", "--db", db, "--json")
    ran = pi(*args, tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    assert _one_object(ran)["output"] == "done"
    assert all(noise in ran.stderr for noise in NOISE)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_approve_and_reject_json_stdout_hold_only_the_result(
    agent: Path, tmp_path: Path, decision: str
) -> None:
    _script(tmp_path, "gated")
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    start = ("run", "hi", "--agent", str(agent), "--session", "s1", "--db", db, "--json")
    pi(*start, tmp=tmp_path, expect=3)
    reason = ["--reason", "no"] if decision == "reject" else []
    args = (decision, "s1", "call_0_0", *reason, "--db", db, "--json")
    ran = pi(*args, tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    assert _one_object(ran)["output"] == "done"
    if decision == "approve":
        assert all(noise in ran.stderr for noise in NOISE)


def test_eval_json_stdout_holds_only_the_report(agent: Path, tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('agent = "agent.toml"\n[[case]]\nname = "a"\nprompt = "hi"\n')
    ran = pi("eval", str(suite), "--json", tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    assert _one_object(ran)["rows"][0]["passed"] is True
    assert all(noise in ran.stderr for noise in NOISE)


def test_without_json_the_answer_still_reaches_stdout(agent: Path, tmp_path: Path) -> None:
    ran = pi("run", "hi", "--agent", str(agent), tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("done")
