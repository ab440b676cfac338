"""A session started from an agent file runs that same agent in every continuation, by a
worker in another process (the runs and views are in-process), on SQLite and PostgreSQL: its allow-list holds and its guards
count the whole user request.

The tools record each execution in a file, since they run in the worker's process."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from cli_support import Ran, pi_inprocess, pi_process
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


def agent_folder(tmp: Path, steps: list[dict[str, Any]]) -> Path:
    module = f"sessiontools_{uuid.uuid4().hex[:8]}"
    folder = tmp / "agent"
    folder.mkdir()
    (folder / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    path = folder / "agent.toml"
    path.write_text(AGENT.format(module=module), encoding="utf-8")
    return path


def pi(*args: str, tmp: Path, process: bool = False) -> Ran:
    """`pi ARGS` in-process, or with `process` in a process of its own (the worker)."""
    env: dict[str, str | None] = {
        "PI_TRACE_DIR": str(tmp / "traces"),
        "AGENT_TOOLS_LOG": str(tmp / "executions.log"),
    }
    # a working folder of its own: nothing imports from the agent's folder by accident
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    if process:
        done = pi_process(*args, cwd=work, env=env)
        return Ran(done.returncode, done.stdout, done.stderr)
    return pi_inprocess(*args, cwd=work, env=env)


def executions(tmp: Path) -> list[str]:
    log = tmp / "executions.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


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
    agent = agent_folder(tmp_path, steps)
    ran = pi("run", "look k1 up", "--agent", str(agent), "--session", "s1", "--db", db_url,
             "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr  # awaiting the background lookup
    worked = pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
                process=True)  # fmt: skip
    assert worked.returncode == 0, worked.stderr
    view = session_view(db_url, "s1", tmp_path)
    assert view["status"] == "completed"
    refused = [m for m in view["messages"] if m["role"] == "tool" and m["name"] == "delete_all"]
    assert len(refused) == 1 and refused[0]["is_error"]
    assert refused[0]["error"]["kind"] == "permission_denied"
    assert executions(tmp_path) == ["lookup k1"]  # delete_all never ran


def test_identical_background_calls_stop_on_a_guard_across_continuations(
    db_url: str, tmp_path: Path
) -> None:
    agent = agent_folder(tmp_path, [lookup() for _ in range(8)] + [{"text": "done"}])
    ran = pi("run", "look k1 up", "--agent", str(agent), "--session", "s2", "--db", db_url,
             "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    worked = pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
                process=True)  # fmt: skip
    assert worked.returncode == 0, worked.stderr
    view = session_view(db_url, "s2", tmp_path)
    assert view["status"] == "stopped"
    last = view["runs"][-1]
    assert last["stop_reason"] in {"loop_detected", "no_progress"}
    assert 1 <= len(executions(tmp_path)) <= 4
