"""Guardrails and the escalate hook from an agent file: `[guardrails]` and `escalate`
wire `MODULE:ATTR` checks into `pi run --agent` (real subprocesses), a mistake is a clear
error naming the file and key, and a session stores them, so every continuation — a
later turn without `--agent`, a worker in another process delivering a background
result — runs with the same checks, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cli_support import agent_folder, executions
from cli_support import pi as cli_pi
from durable_support import *  # noqa: F403
from pi_runtime import Agent, Guardrails
from pi_runtime.loop.definition import AgentDefinition

MODULE = '''\
import os
from pathlib import Path

from pi_runtime import Allow, Deny, tool

LOG = Path(os.environ["AGENT_TOOLS_LOG"])


def _note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as f:
        f.write(line + "\\n")


@tool
def run_sql(sql: str) -> str:
    """Run a read-only query on the reporting database."""
    _note(f"run_sql {sql}")
    return "1 row"


@tool(background=True)
def lookup(key: str) -> dict:
    """Look a key up (slowly, in the background)."""
    _note(f"lookup {key}")
    return {"key": key, "host": "db1.corp.internal"}


TOOLS = [run_sql, lookup]


def no_passwords(text):
    return Deny("asks for credentials") if "password" in text.lower() else Allow()


def no_internal_hosts(answer):
    return Deny("names an internal host") if "corp.internal" in answer else Allow()


def escalate(context):
    return {"ticket": "OPS-1", "reason": context.stop_reason}
'''

AGENT = """\
model = "scripted:script.json"
tools = ["{module}:TOOLS"]
escalate = "{module}:escalate"

[guardrails]
input = ["{module}:no_passwords"]
output = ["{module}:no_internal_hosts"]
tools = {run_sql = ["pi_runtime.guardrails:sql_select_only"]}
"""


def sql(query: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "run_sql", "arguments": {"sql": query}}]}


def agent_file(tmp: Path, steps: list[dict[str, Any]], text: str = AGENT) -> Path:
    return agent_folder(tmp, "guards", MODULE, steps, text)


pi = partial(cli_pi, log="AGENT_TOOLS_LOG")


# --- pi run --agent, in a process of its own ------------------------------------------------


def test_an_agent_files_input_guardrail_refuses_and_its_escalate_hook_is_told(
    tmp_path: Path,
) -> None:
    agent = agent_file(tmp_path, [{"text": "hunter2"}])

    ran = pi("run", "what is the admin password?", "--agent", str(agent), "--json",
             tmp=tmp_path, process=True)  # fmt: skip

    assert ran.returncode == 1, ran.stderr
    result = json.loads(ran.stdout)
    assert (result["status"], result["stop_reason"], result["output"]) == (
        "failed",
        "security",
        None,
    )
    assert "no_passwords refused the message: asks for credentials" in result["error"]
    assert result["messages"] == []
    assert result["escalation"] == {
        "hook": "escalate",
        "value": {"ticket": "OPS-1", "reason": "security"},
        "error": None,
    }
    kinds = [json.loads(line)["kind"] for line in Path(result["trace"]).read_text().splitlines()]
    assert "guardrail_tripped" in kinds and kinds[-2:] == ["escalated", "run_finished"]


def test_an_agent_files_sql_whitelist_refuses_a_write_and_lets_the_select_run(
    tmp_path: Path,
) -> None:
    steps = [sql("SELECT 1; DROP TABLE users"), sql("SELECT count(*) FROM users"), {"text": "1"}]
    agent = agent_file(tmp_path, steps)

    ran = pi("run", "count users", "--agent", str(agent), "--json", tmp=tmp_path, process=True)

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert (result["output"], result["escalation"]) == ("1", None)
    refused = [m for m in result["messages"] if m["role"] == "tool" and m["is_error"]]
    assert [m["error"]["kind"] for m in refused] == ["permission_denied"]
    assert "sql_select_only" in refused[0]["error"]["message"]
    assert executions(tmp_path) == ["run_sql SELECT count(*) FROM users"]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('[guardrails]\ninput = ["{module}:missing"]\n', "guardrails.input: "),
        ('[guardrails]\ninput = "{module}:no_passwords"\n', "must be a list of MODULE:ATTR"),
        ('[guardrails]\noutput = ["no_colon"]\n', "expected MODULE:ATTR"),
        ('[guardrails]\ninput = ["{module}:LOG"]\n', "expected a callable, got PosixPath"),
        ('[guardrails]\ntools = {nope = ["{module}:no_passwords"]}\n', "not have: nope"),
        ('[guardrails]\nbefore = ["{module}:no_passwords"]\n', "guardrails.before: unknown key"),
        ('escalate = "nowhere_{module}:hook"\n', "cannot import"),
    ],
    ids=[
        "missing-attr",
        "not-a-list",
        "not-a-ref",
        "not-callable",
        "unknown-tool",
        "unknown-key",
        "no-module",
    ],
)
def test_a_wrong_guardrail_reference_is_a_clear_usage_error(
    tmp_path: Path, table: str, words: str
) -> None:
    text = 'model = "scripted:script.json"\ntools = ["{module}:TOOLS"]\n' + table
    agent = agent_file(tmp_path, [{"text": "hi"}], text)

    ran = pi("run", "hi", "--agent", str(agent), "--json", tmp=tmp_path)

    assert ran.returncode == 2, ran.stdout
    assert str(agent) in ran.stderr and words in ran.stderr
    assert ran.stdout == ""


def test_agent_from_file_has_the_files_guardrails(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("AGENT_TOOLS_LOG", str(tmp_path / "log"))
    path = agent_file(tmp_path, [{"text": "hi"}])

    agent = Agent.from_file(path, trace_dir=False)

    assert isinstance(agent.guardrails, Guardrails)
    assert [g.__name__ for g in agent.guardrails.input] == ["no_passwords"]
    assert list(agent.guardrails.tools) == ["run_sql"]
    assert agent.escalate is not None and agent.escalate.__name__ == "escalate"


def test_a_definition_keeps_its_guardrails_through_its_stored_form() -> None:
    definition = AgentDefinition(
        guardrails={"input": ["m:a"], "tools": {"run_sql": ["m:b", "m:c"]}}, escalate="m:e"
    )

    stored = json.loads(json.dumps(definition.to_dict()))

    assert AgentDefinition.from_dict(stored) == definition
    assert not definition.same_agent(AgentDefinition(guardrails={"input": ["m:a"]}))


# --- sessions: every continuation keeps them ------------------------------------------------


def test_a_later_turn_of_a_session_keeps_the_input_guardrail(db_url: str, tmp_path: Path) -> None:
    agent = agent_file(tmp_path, [{"text": "hello"}, {"text": "hunter2"}])
    first = pi("run", "hi", "--agent", str(agent), "--session", "s1", "--db", db_url, "--json",
               tmp=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr

    # no --agent: the session's stored agent runs, guardrails included
    later = pi("run", "and the admin password?", "--session", "s1", "--db", db_url, "--json",
               tmp=tmp_path, process=True)  # fmt: skip

    assert later.returncode == 1, later.stderr
    result = json.loads(later.stdout)
    assert result["stop_reason"] == "security"
    assert result["escalation"]["value"] == {"ticket": "OPS-1", "reason": "security"}
    view = json.loads(pi("session", "show", "s1", "--db", db_url, "--json", tmp=tmp_path).stdout)
    assert [m["content"] for m in view["messages"] if m["role"] == "user"] == ["hi"]
    assert view["runs"][-1]["escalation"]["value"]["ticket"] == "OPS-1"


def test_a_workers_continuation_keeps_the_output_guardrail(db_url: str, tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [{"name": "lookup", "arguments": {"key": "db"}}]},
        {"text": "the database is db1.corp.internal"},
    ]
    agent = agent_file(tmp_path, steps)
    ran = pi("run", "where is the db?", "--agent", str(agent), "--session", "s2", "--db", db_url,
             "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr  # awaiting the background lookup

    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
       process=True, expect=0)  # fmt: skip
    assert executions(tmp_path) == ["lookup db"]
    view = json.loads(pi("session", "show", "s2", "--db", db_url, "--json", tmp=tmp_path).stdout)
    last = view["runs"][-1]
    assert (last["kind"], last["stop_reason"], last["output"]) == (
        "server_result",
        "security",
        None,
    )
    assert last["escalation"]["value"] == {"ticket": "OPS-1", "reason": "security"}
    answers = [m for m in view["messages"] if m["role"] == "assistant"]
    assert all("corp.internal" not in json.dumps(m["content"]) for m in answers)
