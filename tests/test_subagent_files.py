"""Sub-agents in agent files: `[subagents.NAME] agent = "other.toml"`, read in whole.

Each test builds a scratch folder: a parent agent file, a child agent file with a tools
module of its own (a name unique per test, so one test's imports never serve another),
and their scripts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi_inprocess, pi_process
from durable_support import *  # noqa: F403  (db_url: SQLite and PostgreSQL)
from pi_runtime import Agent, UserError
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import AgentDefinition
from pi_runtime.observe import read_trace

TOOLS = '''\
from pi_runtime import tool


@tool
def tide_table(port: str) -> dict:
    """High water times of a port."""
    return {"port": port, "high": ["06:10", "18:32"]}


@tool
def delete_port(port: str) -> str:
    """Delete a port."""
    raise AssertionError("the child's allow-list must refuse this")


TOOLS = [tide_table, delete_port]
'''

CHILD = """\
model = "scripted:child.json"
tools = ["{tools}:TOOLS"]
allow = ["tide_table"]
instructions = "You read tide tables."

[limits]
max_steps = 4
"""

PARENT = """\
model = "scripted:parent.json"
instructions = "You plan boat trips."

[subagents.tides]
agent = "child.toml"
description = "Reads tide tables and reports high water."
"""

CHILD_SCRIPT = {
    "steps": [
        {
            "tool_calls": [{"name": "tide_table", "arguments": {"port": "Brest"}}],
            "usage": {"input_tokens": 100, "output_tokens": 10},
        },
        {
            "text": "High water in Brest at 06:10 and 18:32.",
            "usage": {"input_tokens": 50, "output_tokens": 5},
        },
    ]
}

PARENT_SCRIPT = {
    "steps": [
        {
            "tool_calls": [{"name": "tides", "arguments": {"task": "High water in Brest today?"}}],
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
        {"text": "Leave at 06:00.", "usage": {"input_tokens": 20, "output_tokens": 2}},
    ]
}


def scratch(
    tmp: Path,
    *,
    parent: str = PARENT,
    child: str = CHILD,
    parent_script: dict[str, Any] = PARENT_SCRIPT,
) -> Path:
    module = f"tidetools_{uuid.uuid4().hex[:8]}"
    (tmp / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    (tmp / "child.json").write_text(json.dumps(CHILD_SCRIPT), encoding="utf-8")
    (tmp / "parent.json").write_text(json.dumps(parent_script), encoding="utf-8")
    (tmp / "child.toml").write_text(child.replace("{tools}", module), encoding="utf-8")
    path = tmp / "parent.toml"
    path.write_text(parent, encoding="utf-8")
    return path


def test_an_agent_file_names_a_subagent_the_parent_calls_as_a_tool(tmp_path: Path) -> None:
    agent = Agent.from_file(scratch(tmp_path), trace_dir=tmp_path / "traces")
    assert [s.name for s in agent.tools] == ["tides"]
    assert agent.tools[0].description == "Reads tide tables and reports high water."

    result = agent.run_sync("When do we sail?")

    assert result.ok, result.error
    assert result.output == "Leave at 06:00."
    tool_result = result.messages[2]
    assert tool_result.role == "tool"
    assert tool_result.content == "High water in Brest at 06:10 and 18:32."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (180, 18)


def test_the_definition_holds_the_child_read_in(tmp_path: Path) -> None:
    path = scratch(tmp_path)
    definition = read_agent_file(path)
    stored = json.loads(json.dumps(definition.to_dict()))
    (tmp_path / "child.toml").unlink()  # a worker elsewhere has no need of the file

    again = AgentDefinition.from_dict(stored)

    assert again == definition
    entry = again.subagents["tides"]
    assert entry["agent"]["allow"] == ["tide_table"]
    assert entry["agent"]["model"] == f"scripted:{(tmp_path / 'child.json').resolve()}"
    assert entry["keep_history"] is False
    assert again.build_agent(trace_dir=False).run_sync("When?").ok


def test_a_child_file_of_another_folder_resolves_its_paths_against_its_own(
    tmp_path: Path,
) -> None:
    crew = tmp_path / "crew"
    crew.mkdir()
    scratch(crew)
    (crew / "parent.toml").unlink()
    (tmp_path / "parent.json").write_text(json.dumps(PARENT_SCRIPT), encoding="utf-8")
    path = tmp_path / "parent.toml"
    path.write_text(PARENT.replace('"child.toml"', '"crew/child.toml"'), encoding="utf-8")

    assert Agent.from_file(path, trace_dir=False).run_sync("When?").ok


def test_same_agent_ignores_a_childs_limits_but_not_its_tools(tmp_path: Path) -> None:
    path = scratch(tmp_path)
    before = read_agent_file(path)
    child = tmp_path / "child.toml"
    child.write_text(child.read_text().replace("max_steps = 4", "max_steps = 9"))
    assert read_agent_file(path).same_agent(before)
    child.write_text(child.read_text().replace('allow = ["tide_table"]\n', ""))
    assert not read_agent_file(path).same_agent(before)


# --- mistakes ----------------------------------------------------------------------------


def test_an_agent_file_that_includes_itself_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = scratch(
        tmp_path,
        parent=PARENT + '\n[subagents.again]\nagent = "parent.toml"\ndescription = "Me."\n',
    )
    with pytest.raises(UserError) as caught:
        Agent.from_file(path, trace_dir=False)
    text = str(caught.value)
    assert f"{path}:9: subagents.again.agent" in text
    assert "parent.toml → parent.toml" in text


def test_agent_files_that_include_each_other_are_refused_naming_both_keys(
    tmp_path: Path,
) -> None:
    child = CHILD + '\n[subagents.back]\nagent = "parent.toml"\ndescription = "The parent."\n'
    path = scratch(tmp_path, child=child)
    with pytest.raises(UserError) as caught:
        read_agent_file(path)
    text = str(caught.value)
    assert "subagents.tides.agent" in text and "subagents.back.agent" in text
    assert "parent.toml → child.toml → parent.toml" in text


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('agent = "child.toml"\n', "subagents.tides.description: must say what"),
        ('agent = "child.toml"\ndescription = "  "\n', "subagents.tides.description"),
        ('agent = 3\ndescription = "x"\n', "subagents.tides.agent: must name another agent file"),
        ('description = "x"\n', "subagents.tides.agent: must name another agent file"),
        ('agent = "missing.toml"\ndescription = "x"\n', "subagents.tides.agent: agent file"),
        ('agent = "child.toml"\ndescription = "x"\ncolour = 1\n', "subagents.tides.colour"),
        (
            'agent = "child.toml"\ndescription = "x"\nkeep_history = "yes"\n',
            "subagents.tides.keep_history: must be true or false",
        ),
    ],
    ids=["no-description", "blank", "not-a-path", "no-agent", "missing", "unknown", "keep"],
)
def test_a_bad_subagent_entry_is_one_clear_error(
    tmp_path: Path, section: str, message: str
) -> None:
    parent = 'model = "scripted:parent.json"\n\n[subagents.tides]\n' + section
    path = scratch(tmp_path, parent=parent)
    with pytest.raises(UserError) as caught:
        Agent.from_file(path, trace_dir=False)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_mistake_in_the_child_file_names_both_files_and_keys(tmp_path: Path) -> None:
    path = scratch(tmp_path, child=CHILD.replace("max_steps = 4", "max_stepz = 4"))
    with pytest.raises(UserError) as caught:
        Agent.from_file(path, trace_dir=False)
    text = str(caught.value)
    assert f"{path}:5: subagents.tides.agent" in text
    assert f"{tmp_path / 'child.toml'}:7: limits.max_stepz: unknown key" in text


def test_a_subagent_named_like_a_tool_is_refused(tmp_path: Path) -> None:
    scratch(tmp_path)
    clash = tmp_path / "clash.toml"
    section = '\n[subagents.tide_table]\nagent = "child.toml"\ndescription = "x"\n'
    clash.write_text((tmp_path / "child.toml").read_text() + section, encoding="utf-8")
    with pytest.raises(UserError, match=r"subagents\.tide_table: a tool of `tools` has this"):
        Agent.from_file(clash, trace_dir=False)


def test_a_subagent_name_must_be_a_tool_name() -> None:
    with pytest.raises(UserError, match=r"subagents\.re search"):
        AgentDefinition.from_dict({"subagents": {"re search": {"agent": {}, "description": "x"}}})


# --- the command line ----------------------------------------------------------------------


def test_pi_run_agent_runs_the_parent_and_its_subagent_in_a_subprocess(tmp_path: Path) -> None:
    path = scratch(tmp_path)
    traces = tmp_path / "traces"
    ran = pi_process(
        "run", "When do we sail?", "--agent", str(path), "--json",
        cwd=tmp_path, env={"PI_TRACE_DIR": str(traces)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert data["output"] == "Leave at 06:00."
    assert data["usage"]["input_tokens"] == 180 and data["metrics"]["child_runs"] == 1
    assert data["messages"][2]["usage"] == {
        "input_tokens": 150,
        "output_tokens": 15,
        "cached_tokens": 0,
    }
    (child,) = [e for e in read_trace(data["trace"]) if e["kind"] == "child_run"]
    started = read_trace(child["trace"])[0]
    assert started["kind"] == "run_started" and started["parent_run_id"] == data["run_id"]
    assert started["tools"] == ["tide_table"]  # the child's own allow-list


def test_a_session_continues_with_the_stored_subagent(tmp_path: Path, db_url: str) -> None:
    path = scratch(tmp_path)
    db = db_url
    env = {"PI_TRACE_DIR": str(tmp_path / "traces")}
    first = pi_inprocess(
        "run", "When do we sail?", "--agent", str(path), "--session", "s1", "--db", db, "--json",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    # the second turn: the parent's script goes on at its third step, calling the child
    # again; the child's file is gone, the session holds its definition
    steps = PARENT_SCRIPT["steps"]
    (tmp_path / "parent.json").write_text(json.dumps({"steps": [*steps, *steps]}))
    (tmp_path / "child.toml").unlink()
    again = pi_inprocess(
        "run", "And tomorrow?", "--session", "s1", "--db", db, "--json", cwd=tmp_path, env=env
    )
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["output"] == "Leave at 06:00."
    assert data["usage"]["input_tokens"] == 180
