"""Agent files: one TOML file defines the whole agent; mistakes are one clear error.

The file's tools module lives beside it in a scratch folder (a name unique per test, so
imports of one test never serve another)."""

from __future__ import annotations

import inspect
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi
from pi_runtime import Agent, UserError
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import AgentDefinition

TOOLS = '''\
from pi_runtime import tool

RAN = []


@tool
def get_weather(city: str) -> dict:
    """Weather of a city."""
    RAN.append(("get_weather", city))
    return {"city": city, "sky": "rain"}


@tool
def delete_all() -> str:
    """Delete everything."""
    RAN.append(("delete_all",))
    return "deleted"


TOOLS = [get_weather, delete_all]
'''

SCRIPT = {
    "steps": [
        {"tool_calls": [{"name": "delete_all", "arguments": {}}]},
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Beijing"}}]},
        {"text": "Rain in Beijing."},
    ]
}

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def scratch(tmp: Path, body: str, *, script: dict[str, Any] = SCRIPT) -> tuple[Path, str]:
    """An agent folder: tools module, script, schema and `agent.toml` holding `body`
    (`{tools}` replaced by the module's name)."""
    module = f"agenttools_{uuid.uuid4().hex[:8]}"
    (tmp / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    (tmp / "script.json").write_text(json.dumps(script), encoding="utf-8")
    (tmp / "answer.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    path = tmp / "agent.toml"
    path.write_text(body.replace("{tools}", module), encoding="utf-8")
    return path, module


BASE = """\
model = "scripted:script.json"
tools = ["{tools}:TOOLS"]
allow = ["get_weather"]
instructions = "You answer weather questions."

[limits]
max_steps = 5
"""


def test_agent_file_defines_model_tools_allow_instructions_and_limits(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)
    agent = Agent.from_file(path, trace_dir=False)
    assert agent.limits.max_steps == 5
    assert "You answer weather questions." in agent.system
    result = agent.run_sync("weather in Beijing?")
    assert result.output == "Rain in Beijing."
    refused = result.messages[2]
    assert refused.role == "tool" and refused.is_error
    assert refused.error is not None and refused.error.kind == "permission_denied"
    # the script path was resolved against the file's folder, wherever we run from
    assert agent.definition is not None
    assert agent.definition.model == f"scripted:{(tmp_path / 'script.json').resolve()}"


def test_agent_file_with_a_table_of_prompt_parts_contract_budget_and_tool_choice(
    tmp_path: Path,
) -> None:
    body = BASE.replace("[limits]", 'tool_choice = "get_weather"\noutput = "answer.json"\n[limits]')
    body += (
        "[instructions]\nrole = 'You are a forecaster.'\ntask = 'Forecast.'\n"
        "[budget]\ncontext_window = 4096\n[retrieval]\nthreshold = 1\ntop_k = 1\n"
        'embedder = "bm25"\n'
    )
    body = body.replace('instructions = "You answer weather questions."\n', "")
    script = {
        "steps": [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Beijing"}}]},
            {"text": '{"answer": "rain"}'},
        ]
    }
    path, _ = scratch(tmp_path, body, script=script)
    agent = Agent.from_file(path, trace_dir=False)
    assert "You are a forecaster." in agent.system and agent.budget.context_window == 4096
    assert agent.contract is not None and agent.contract.name == "answer"
    assert agent.retriever is not None and agent.retriever.top_k == 1
    result = agent.run_sync("weather?")
    assert result.output == {"answer": "rain"}
    requests = [e for e in result.events if e.kind == "model_request"]
    assert [r.tool_choice for r in requests] == ["get_weather", "auto"]  # first call only


def test_overrides_replace_the_files_values(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"steps": [{"text": "overridden"}]}), encoding="utf-8")
    agent = Agent.from_file(
        path, trace_dir=False, model=f"scripted:{other}", limits={"loop_window": 8}
    )
    assert agent.limits.max_steps == 5 and agent.limits.loop_window == 8  # merged
    assert agent.run_sync("hi").output == "overridden"


def test_definition_round_trips_through_its_stored_form(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE.replace("[limits]", 'output = "answer.json"\n[limits]'))
    definition = read_agent_file(path)
    stored = json.loads(json.dumps(definition.to_dict()))
    again = AgentDefinition.from_dict(stored)
    assert again == definition
    assert again.output is not None and again.output["schema"] == SCHEMA  # read in, not a path


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (BASE.replace("[limits]", "colour = 'red'\n[limits]"), ":6:", "colour: unknown key"),
        (BASE + "loop_windw = 3\n", ":8:", "limits.loop_windw: unknown key"),
        (BASE.replace("max_steps = 5", "max_stepz = 5"), ":7:", "limits.max_stepz: unknown key"),
        (BASE.replace("max_steps = 5", 'max_steps = "5"'), ":7:", "limits.max_steps"),
        (BASE.replace("max_steps = 5", "max_steps = 0"), ":6:", "max_steps must be at least 1"),
        (
            BASE.replace('allow = ["get_weather"]', 'allow = "get_weather"'),
            ":3:",
            "allow: must be a list",
        ),
        (
            BASE.replace('allow = ["get_weather"]', 'allow = ["nope"]'),
            ":3:",
            "allow names tools the agent does not have",
        ),
        (
            BASE.replace("{tools}:TOOLS", "no_such_module_xyz:TOOLS"),
            ":2:",
            "cannot import 'no_such_module_xyz'",
        ),
        (BASE.replace("{tools}:TOOLS", "{tools}:MISSING"), ":2:", "has no attribute 'MISSING'"),
        (
            BASE.replace("[limits]", 'output = "missing.json"\n[limits]'),
            ":6:",
            "output: cannot read",
        ),
        (BASE.replace("[limits]", 'tool_choice = "delete_all"\n[limits]'), ":6:", "tool_choice"),
        (BASE + "[retrieval]\ntop_k = 0\n", ":8:", "top_k must be an integer >= 1"),
        (
            BASE.replace("instructions =", "# instructions =") + "[instructions]\nrol = 'x'\n",
            ":9:",
            "instructions.rol: unknown key",
        ),
        (BASE.replace("[limits]", "model = 1\n[limits]"), "", "not valid TOML"),
        ("model = = 1\n", "", "not valid TOML"),
        (
            BASE.replace("[limits]", 'import_path = "/tmp"\n[limits]'),
            ":6:",
            "import_path: is set by Pi",
        ),
        (
            BASE.replace("[limits]", "job_max_attempts = 99999999999999999999\n[limits]"),
            ":6:",
            "job_max_attempts: must be an integer from 1 to 1000, got 99999999999999999999",
        ),
        (
            BASE + '[output]\nschema = "answer.json"\nstrict = "no"\n',
            ":10:",
            "output.strict: must be true or false, got 'no'",
        ),
        (
            BASE + '[output]\nschema = "answer.json"\nstrict = "false"\n',
            ":10:",
            "output.strict: must be true or false, got 'false'",
        ),
    ],
)
def test_a_bad_agent_file_is_one_clear_error_naming_file_line_and_key(
    tmp_path: Path, body: str, where: str, message: str
) -> None:
    path, _ = scratch(tmp_path, body)
    with pytest.raises(UserError) as caught:
        Agent.from_file(path, trace_dir=False)
    text = str(caught.value)
    assert str(path) in text and where in text and message in text
    assert "\n" not in text


def test_pi_run_agent_exits_2_with_the_file_and_key_on_a_bad_file(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE.replace("max_steps = 5", "max_stepz = 5"))
    done = pi("run", "hi", "--agent", str(path), "--json", cwd=tmp_path, tmp=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert f"{path}:7: limits.max_stepz: unknown key" in " ".join(done.stderr.split())


@pytest.mark.parametrize(
    "body",
    ["x = " + "[" * 2000 + "]" * 2000 + "\n", "limits = " + "{a=" * 1000 + "1" + "}" * 1000],
    ids=["arrays-2000-deep", "inline-tables-1000-deep"],
)
def test_an_agent_file_nested_too_deeply_is_not_valid_toml(tmp_path: Path, body: str) -> None:
    path, _ = scratch(tmp_path, body)
    with pytest.raises(UserError, match=r"^agent file .*: not valid TOML: nested too deeply$"):
        read_agent_file(path)


def test_pi_run_agent_exits_2_on_a_file_nested_too_deeply_for_toml(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, "x = " + "[" * 2000 + "]" * 2000 + "\n")
    done = pi("run", "hi", "--agent", str(path), cwd=tmp_path, tmp=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"agent file {path}: not valid TOML: nested too deeply" in " ".join(done.stderr.split())


def test_an_agent_file_saved_with_a_byte_order_mark_reads_with_its_lines(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, "\ufeff" + BASE)
    assert Agent.from_file(path, trace_dir=False).limits.max_steps == 5
    path.write_text("\ufeffcolour = 'red'\n" + BASE, encoding="utf-8")
    with pytest.raises(UserError, match=r"agent\.toml:1: colour: unknown key"):
        Agent.from_file(path, trace_dir=False)


def test_a_bad_value_given_over_the_files_does_not_blame_the_files_line(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)

    with pytest.raises(UserError) as given:
        Agent.from_file(path, trace_dir=False, model="nosuchprovider:x")
    path.write_text(path.read_text().replace("scripted:", "nosuchprovider:", 1))
    with pytest.raises(UserError) as own:
        Agent.from_file(path, trace_dir=False, limits={"max_steps": 3})

    assert str(given.value).startswith("model: unknown model spec 'nosuchprovider:x'")
    assert str(given.value).endswith(f"(given in place of {path}'s)")
    assert str(own.value).startswith(f"{path}:1: model: unknown model spec 'nosuchprovider:")


def test_an_output_schema_file_nested_too_deeply_is_one_clear_error(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE.replace("[limits]", 'output = "deep.json"\n[limits]'))
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(
        UserError, match=r"agent\.toml:6: output: .*deep\.json is nested too deeply"
    ):
        Agent.from_file(path, trace_dir=False)


def test_pi_run_agent_flags_override_the_file(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)
    ran = pi("run", "hi", "--agent", str(path), "--json", cwd=tmp_path, tmp=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["output"] == "Rain in Beijing."
    # --max-steps 1 overrides the file's 5: the first call is refused, then the guard stops
    capped = pi(
        "run", "hi", "--agent", str(path), "--max-steps", "1", "--json", cwd=tmp_path, tmp=tmp_path
    )
    data = json.loads(capped.stdout)
    assert capped.returncode == 1 and data["stop_reason"] == "max_steps" and data["steps"] == 1


def test_pi_run_session_sends_the_tool_choice_it_was_given(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    ran = pi(
        "run", "hi", "--agent", str(path), "--session", "s1", "--db", db,
        "--tool-choice", "get_weather", "--json", cwd=tmp_path, tmp=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    trace = Path(json.loads(ran.stdout)["trace"])
    requests = [
        json.loads(line)
        for line in trace.read_text(encoding="utf-8").split("\n")
        if line and json.loads(line)["kind"] == "model_request"
    ]
    assert [r["tool_choice"] for r in requests][:2] == ["get_weather", "auto"]


def test_a_session_started_from_an_agent_file_keeps_it(tmp_path: Path) -> None:
    path, _ = scratch(tmp_path, BASE)
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    first = pi(
        "run", "hi", "--agent", str(path), "--session", "s1", "--db", db, "--json",
        cwd=tmp_path, tmp=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    other = tmp_path / "other"
    other.mkdir()
    changed, _ = scratch(other, BASE.replace('allow = ["get_weather"]', ""))
    again = pi(
        "run", "hi", "--agent", str(changed), "--session", "s1", "--db", db, "--json",
        cwd=tmp_path, tmp=tmp_path,
    )  # fmt: skip
    assert again.returncode == 2 and "a session keeps its agent" in " ".join(again.stderr.split())


def test_an_output_fallback_answers_when_the_repairs_are_spent(tmp_path: Path) -> None:
    body = BASE + '[output]\nschema = "answer.json"\nmax_repairs = 1\n'
    body += '[output.fallback]\nanswer = "no forecast available"\n'
    script = {"steps": [{"text": "not json"}, {"text": "still not json"}]}
    path, _ = scratch(tmp_path, body, script=script)
    result = Agent.from_file(path, trace_dir=False).run_sync("weather?")
    assert result.stop_reason == "contract_violation" and result.contract_errors
    assert result.output == {"answer": "no forecast available"}


def test_a_fallback_that_breaks_the_contract_is_refused_at_load(tmp_path: Path) -> None:
    body = BASE + '[output]\nschema = "answer.json"\n[output.fallback]\nwrong = 1\n'
    path, _ = scratch(tmp_path, body)
    with pytest.raises(UserError, match=r"output: .*fallback does not match"):
        Agent.from_file(path, trace_dir=False)


def test_two_agents_tool_modules_of_one_name_are_refused_not_mixed_up(tmp_path: Path) -> None:
    module = f"clash_{uuid.uuid4().hex[:8]}"
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{module}.py").write_text(TOOLS, encoding="utf-8")
        (folder / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
        (folder / "agent.toml").write_text(BASE.replace("{tools}", module), encoding="utf-8")
    Agent.from_file(tmp_path / "one" / "agent.toml", trace_dir=False)
    with pytest.raises(UserError, match=r"already imported from .*one"):
        Agent.from_file(tmp_path / "two" / "agent.toml", trace_dir=False)


def test_two_agents_guardrail_modules_of_one_name_are_refused_not_mixed_up(
    tmp_path: Path,
) -> None:
    module = f"checks_{uuid.uuid4().hex[:8]}"
    for name, word in (("one", "first"), ("two", "second")):
        folder = tmp_path / name
        folder.mkdir()
        _, tools = scratch(folder, BASE)
        guard = f"def check(value):\n    return None  # the {word} agent's\n"
        (folder / f"{module}.py").write_text(guard, encoding="utf-8")
        body = BASE.replace("{tools}", tools) + f'[guardrails]\ninput = ["{module}:check"]\n'
        (folder / "agent.toml").write_text(body, encoding="utf-8")
    Agent.from_file(tmp_path / "one" / "agent.toml", trace_dir=False)
    with pytest.raises(UserError, match=r"already imported from .*one"):
        Agent.from_file(tmp_path / "two" / "agent.toml", trace_dir=False)


def test_a_guardrail_module_calling_sys_exit_at_import_is_a_user_error(tmp_path: Path) -> None:
    module = f"exits_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("import sys\n\nsys.exit(5)\n", encoding="utf-8")
    path, _ = scratch(tmp_path, f'escalate = "{module}:hook"\n' + BASE)
    with pytest.raises(UserError, match=rf"importing '{module}' called sys.exit\(5\)"):
        Agent.from_file(path, trace_dir=False)


def test_limits_live_in_one_place_with_the_retries() -> None:
    from pi_runtime import Limits
    from pi_runtime.testing import ScriptedModel

    parameters = inspect.signature(Agent).parameters
    for shortcut in ("max_steps", "token_budget", "wall_clock_s", "retry_base_s", "model_retries"):
        assert shortcut not in parameters  # Limits holds them; the agent file's [limits] too
    agent = Agent(ScriptedModel([]), limits=Limits(model_retries=0), trace_dir=False)
    assert agent.limits.model_retries == 0
    with pytest.raises(UserError, match="limits must be a Limits"):
        Agent(ScriptedModel([]), limits={"max_steps": 3}, trace_dir=False)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="model_retries must be an integer >= 0"):
        Limits(model_retries=-1)


def test_false_turns_an_optional_limit_off_since_toml_has_no_null(tmp_path: Path) -> None:
    body = BASE + "token_budget = false\nwall_clock_s = false\nmax_tool_calls = false\n"
    path, _ = scratch(tmp_path, body)
    agent = Agent.from_file(path, trace_dir=False)
    assert agent.limits.token_budget is None and agent.limits.wall_clock_s is None
    assert agent.limits.max_tool_calls is None
    assert agent.definition is not None and agent.definition.limits["token_budget"] is None
    # a switch stays a switch, and `false` on a required count is still an error
    path, _ = scratch(tmp_path, BASE + "block_repeated_calls = false\n")
    assert Agent.from_file(path, trace_dir=False).limits.block_repeated_calls is False
    path, _ = scratch(tmp_path, BASE.replace("max_steps = 5", "max_steps = false"))
    with pytest.raises(UserError, match=r"limits\.max_steps"):
        Agent.from_file(path, trace_dir=False)
