"""Long-term memory from an agent file: `[memory]` checked key by key, stored with the
session, and wired through `pi run --agent` (real subprocesses), `pi worker` and `pi eval`
on SQLite and PostgreSQL — the example in `examples/memory/` is the agent under test."""

from __future__ import annotations

import json
import re
import shutil
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cli_support import Ran
from cli_support import pi as cli_pi
from durable_support import *  # noqa: F403
from pi_runtime.durable import open_store
from pi_runtime.observe import read_trace

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "memory"


pi = partial(cli_pi, env={"PI_DB": None})


def trace_of(ran: Ran) -> list[dict[str, Any]]:
    return read_trace(json.loads(ran.stdout)["trace"])


def test_a_fact_told_in_one_session_reaches_the_next_through_pi_run(
    db_url: str, tmp_path: Path
) -> None:
    agent = str(EXAMPLE / "agent.toml")
    told = pi("run", "I'm vegetarian, please remember that.", "--agent", agent,
              "--session", "day-1", "--db", db_url, "--json", tmp=tmp_path, process=True)  # fmt: skip
    assert told.returncode == 0, told.stderr
    written = [e for e in trace_of(told) if e["kind"] == "memory_written"]
    assert [(e["scope"], e["via"]) for e in written] == [("user:alice", "tool")]

    store = open_store(db_url)
    try:
        (fact,) = store.list_facts("user:alice")
        assert fact.text == "Alice is vegetarian." and fact.session_id == "day-1"
        assert fact.id in written[0]["fact_ids"]
        stored = store.get_session("day-1")
        assert stored is not None and stored.agent is not None
        assert stored.agent["memory"] == {
            "scope": "user:alice", "read": True, "top_k": 5, "budget_tokens": 400,
            "write": "tool",
        }  # fmt: skip
    finally:
        store.close()

    dinner = str(EXAMPLE / "dinner.json")
    asked = pi("run", "What should I cook tonight?", "--agent", agent, "--model",
               f"scripted:{dinner}", "--session", "day-2", "--db", db_url, "--json",
               tmp=tmp_path, process=True)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    events = trace_of(asked)
    (read,) = [e for e in events if e["kind"] == "memory_recalled"]
    assert (read["via"], read["fact_ids"]) == ("prompt", [fact.id])
    request = next(e for e in events if e["kind"] == "model_request")
    assert request["context"]["tokens"]["memory"] > 0
    assert "vegetarian" in json.loads(asked.stdout)["output"]
    shown = pi("trace", "show", json.loads(asked.stdout)["trace"], tmp=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "user:alice via prompt: 1 fact(s) by" in " ".join(shown.stdout.split())


def test_pi_run_without_a_session_keeps_memory_in_the_given_store(
    db_url: str, tmp_path: Path
) -> None:
    agent = str(EXAMPLE / "agent.toml")
    ran = pi("run", "remember: vegetarian", "--agent", agent, "--db", db_url, "--json",
             tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    store = open_store(db_url)
    try:
        assert [f.text for f in store.list_facts("user:alice")] == ["Alice is vegetarian."]
        assert store.get_session("day-1") is None  # no session was made for it
    finally:
        store.close()


def test_db_without_a_session_is_still_refused_for_an_agent_without_memory(
    tmp_path: Path,
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"text": "hi"}]}), encoding="utf-8")
    ran = pi("run", "hi", "--model", f"scripted:{script}", "--db", "sqlite:///x.db",
             tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 2
    assert "add --session" in ran.stderr


BACKGROUND = '''\
from pi_runtime import tool


@tool(background=True)
def slow_lookup(key: str) -> str:
    """Look a key up, slowly."""
    return "value of " + key


TOOLS = [slow_lookup]
'''


def test_a_worker_continuation_reads_the_sessions_memory(db_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    module = f"memtools_{tmp_path.name.replace('-', '_')}"
    (folder / f"{module}.py").write_text(BACKGROUND, encoding="utf-8")
    steps = [
        {"tool_calls": [{"name": "slow_lookup", "arguments": {"key": "k"}}]},
        {"text": "done"},
    ]
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    (folder / "agent.toml").write_text(
        f'model = "scripted:script.json"\ntools = ["{module}:TOOLS"]\n\n'
        '[memory]\nscope = "user:alice"\nembedder = "bm25"\n',
        encoding="utf-8",
    )
    store = open_store(db_url)
    store.remember_fact("user:alice", "Alice's lookups are urgent.")
    store.close()
    ran = pi("run", "look k up", "--agent", str(folder / "agent.toml"), "--session", "bg",
             "--db", db_url, "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path, expect=0)
    shown = pi("session", "show", "bg", "--db", db_url, "--json", tmp=tmp_path)
    view = json.loads(shown.stdout)
    assert view["status"] == "completed", view
    traces = sorted((tmp_path / "traces").glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    assert len(traces) == 2
    continued = read_trace(traces[-1])
    (read,) = [e for e in continued if e["kind"] == "memory_recalled"]
    assert read["method"] == "bm25" and len(read["fact_ids"]) == 1 and read["error"] is None


AGENT_HEAD = 'model = "scripted:s.json"\n'


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[memory]\nread = true\n", r"agent\.toml:2: memory: needs `scope`"),
        ('[memory]\nscope = "user:a"\ntop_k = 0\n', r"memory: MemoryPolicy\.top_k must be"),
        ('[memory]\nscope = "user:a"\nforget = true\n', r"agent\.toml:4: memory\.forget: unknown"),
        ('[memory]\nscope = "user:a"\nwrite = "sometimes"\n', r"memory\.write: Input should be"),
        ('[memory]\nscope = "user:a"\nbudget_tokens = "lots"\n', r"memory\.budget_tokens"),
        ('[memory]\nscope = " user:a"\n', r"memory: a memory scope must be printable"),
        ('memory = "user:a"\n', r"memory: must be a table"),
    ],
)
def test_a_bad_memory_table_names_the_file_line_and_key(
    table: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"steps": [{"text": "hi"}]}), encoding="utf-8")
    (tmp_path / "agent.toml").write_text(AGENT_HEAD + table, encoding="utf-8")
    ran = pi("run", "hi", "--agent", str(tmp_path / "agent.toml"), tmp=tmp_path)
    assert ran.returncode == 2
    assert re.search(message, ran.stderr), ran.stderr
    assert not (tmp_path / "traces").exists()  # the run never started


def test_an_eval_case_starts_with_an_empty_memory(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    shutil.copytree(EXAMPLE, folder)
    (folder / "suite.toml").write_text(
        'agent = "agent.toml"\n\n'
        '[[case]]\nname = "remembers"\nprompt = "I am vegetarian"\n'
        'expect_tools = [{name = "remember"}]\n\n'
        '[[case]]\nname = "again"\nprompt = "I am vegetarian"\n'
        'expect_tools = [{name = "remember"}]\n',
        encoding="utf-8",
    )
    ran = pi("eval", str(folder / "suite.toml"), "--json", tmp=tmp_path)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    rows = json.loads(ran.stdout)["rows"]
    assert [r["passed"] for r in rows] == [True, True]
    written = [
        e
        for path in sorted((tmp_path / "traces").glob("*.jsonl"))
        for e in read_trace(path)
        if e["kind"] == "memory_written"
    ]
    # each case wrote the fact as new: no case saw another's memory
    assert [e["known"] for e in written] == [[], []]


def test_the_memory_demo_runs_offline(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "examples.memory.demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "vegetarian, as you told me" in done.stdout
    assert "Steak frites" in done.stdout  # Bob's dinner: none of Alice's memory
