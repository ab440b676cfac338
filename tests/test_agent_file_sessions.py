"""A session started from an agent file runs that same agent in every continuation, by a
worker in another process (the runs and views are in-process), on SQLite and PostgreSQL: its allow-list holds and its guards
count the whole user request.

The tools record each execution in a file, since they run in the worker's process."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from cli_support import agent_folder, executions
from cli_support import pi as cli_pi
from durable_support import *  # noqa: F403

TOOLS = '''\
import os
from pathlib import Path

from pi_runtime import tool

LOG = Path(os.environ["AGENT_TOOLS_LOG"])


def _note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as f:
        f.write(line + "\\n")


@tool(background=True)
def lookup(key: str) -> dict:
    """Look a key up (slowly, in the background)."""
    _note(f"lookup {key}")
    return {"key": key, "value": 42}


@tool
def delete_all() -> str:
    """Delete everything."""
    _note("delete_all")
    return "deleted"


TOOLS = [lookup, delete_all]
'''

AGENT = """\
model = "scripted:script.json"
tools = ["{module}:TOOLS"]
allow = ["lookup"]
instructions = "You look keys up."

[limits]
max_steps = 12
"""


def lookup(key: str = "k1") -> dict[str, Any]:
    return {"tool_calls": [{"name": "lookup", "arguments": {"key": key}}]}


# the tools log their runs to a file, as they run in the worker's process too
pi = partial(cli_pi, log="AGENT_TOOLS_LOG")


def session_view(db: str, session: str, tmp: Path) -> dict[str, Any]:
    shown = pi("session", "show", session, "--db", db, "--json", tmp=tmp)
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def test_a_continuation_keeps_the_agent_files_allow_list(db_url: str, tmp_path: Path) -> None:
    steps = [
        lookup(),
        {"tool_calls": [{"name": "delete_all", "arguments": {}}]},
        {"text": "done"},
    ]
    agent = agent_folder(tmp_path, "sessiontools", TOOLS, steps, AGENT)
    ran = pi("run", "look k1 up", "--agent", str(agent), "--session", "s1", "--db", db_url,
             "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr  # awaiting the background lookup
    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
       process=True, expect=0)  # fmt: skip
    view = session_view(db_url, "s1", tmp_path)
    assert view["status"] == "completed"
    refused = [m for m in view["messages"] if m["role"] == "tool" and m["name"] == "delete_all"]
    assert len(refused) == 1 and refused[0]["is_error"]
    assert refused[0]["error"]["kind"] == "permission_denied"
    assert executions(tmp_path) == ["lookup k1"]  # delete_all never ran


def test_identical_background_calls_stop_on_a_guard_across_continuations(
    db_url: str, tmp_path: Path
) -> None:
    steps = [lookup() for _ in range(8)] + [{"text": "done"}]
    agent = agent_folder(tmp_path, "sessiontools", TOOLS, steps, AGENT)
    ran = pi("run", "look k1 up", "--agent", str(agent), "--session", "s2", "--db", db_url,
             "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
       process=True, expect=0)  # fmt: skip
    view = session_view(db_url, "s2", tmp_path)
    assert view["status"] == "stopped"
    last = view["runs"][-1]
    assert last["stop_reason"] in {"loop_detected", "no_progress"}
    assert 1 <= len(executions(tmp_path)) <= 4
