"""Versioned prompt templates, the system prompt's parts, output discipline, runtime block."""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path

import pytest

import pi_runtime.context as context_package
from pi_runtime import Agent, UserError, tool
from pi_runtime.context import (
    OUTPUT_DISCIPLINE,
    PromptParts,
    load_template,
    render_system_prompt,
    runtime_block,
    tool_summary,
)
from pi_runtime.models import ToolDefinition
from pi_runtime.observe import read_trace
from pi_runtime.testing import ScriptedModel

BUILTIN = Path(context_package.__file__).parent / "prompts" / "system@1.md"
DISCIPLINE_LINES = OUTPUT_DISCIPLINE.splitlines()
V2 = "v2 prompt. $role\n\n# Task\n$task\n$tool_rules\n$output_format\n$safety\n$uncertainty\n"


@tool
def lookup(key: str) -> str:
    """Look a key up in the catalogue.

    Keys are case-sensitive.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


@tool
def convert(amount: float) -> float:
    """Convert an amount to euros.

    Args:
        amount: the amount.
    """
    return amount / 2


def user_prompts(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "prompts"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def quiet_agent(**kwargs: object) -> Agent:
    return Agent(ScriptedModel([{"text": "ok"}]), trace_dir=False, **kwargs)  # type: ignore[arg-type]


# --- templates -------------------------------------------------------------------------


def test_builtin_system_template_is_found() -> None:
    template = load_template("system")
    assert (template.name, template.version) == ("system", 1)
    assert template.text == BUILTIN.read_text(encoding="utf-8")
    assert load_template("system", 1) == template
    assert template.sha256 == hashlib.sha256(BUILTIN.read_bytes()).hexdigest()


def test_user_directory_adds_and_shadows_versions(tmp_path: Path) -> None:
    directory = user_prompts(
        tmp_path,
        {"system@2.md": V2, "system@1.md": "mine $role", "other@1.md": "x", "README.txt": "y"},
    )
    latest = load_template("system", directory=directory)
    assert (latest.version, latest.text) == (2, V2)
    assert load_template("system", 1, directory=directory).text == "mine $role"
    assert load_template("system", 1).text == BUILTIN.read_text(encoding="utf-8")


def test_unrelated_files_in_the_prompt_directory_are_ignored(tmp_path: Path) -> None:
    directory = user_prompts(tmp_path, {"system@2.md": V2})
    (directory / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00")
    assert load_template("system", directory=directory).version == 2


@pytest.mark.parametrize(
    ("name", "version", "message"),
    [
        ("nosuch", None, "no prompt template named 'nosuch'"),
        ("system", 9, r"'system' has no version 9; versions: \[1\]"),
    ],
)
def test_unknown_template_is_a_clear_error(name: str, version: int | None, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_template(name, version)


def test_missing_prompt_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_template("system", directory=tmp_path / "absent")


def test_missing_placeholder_is_a_user_error_naming_it(tmp_path: Path) -> None:
    directory = user_prompts(tmp_path, {"system@3.md": V2 + "\n## Audience\n$audience\n"})
    template = load_template("system", directory=directory)
    with pytest.raises(UserError, match=r"system@3 needs a value for \$audience"):
        render_system_prompt(template=template)
    text, _ = render_system_prompt(PromptParts(extra={"audience": "buyers"}), template=template)
    assert text.endswith("## Audience\nbuyers\n")
    with pytest.raises(UserError, match=r"\$audience"):
        quiet_agent(prompt_template=template)


def test_stray_dollar_in_a_template_is_a_user_error(tmp_path: Path) -> None:
    directory = user_prompts(tmp_path, {"system@2.md": V2 + "Never spend over $5 a call.\n"})
    with pytest.raises(UserError, match="system@2"):
        render_system_prompt(template=load_template("system", directory=directory))


# --- the system prompt's parts ---------------------------------------------------------


def test_parts_render_in_order_role_task_tools_output_safety_uncertainty() -> None:
    parts = PromptParts(
        role="ROLE-7f3",
        task="TASK-7f3",
        tool_rules="TOOLS-7f3",
        output_format="OUTPUT-7f3",
        safety="SAFETY-7f3",
        uncertainty="UNCERTAIN-7f3",
    )
    text, template = render_system_prompt(parts)
    assert template == load_template("system")
    positions = [
        text.index(marker) for marker in ("ROLE", "TASK", "TOOLS", "OUTPUT", "SAFETY", "UNCERTAIN")
    ]
    assert positions == sorted(positions)
    headings = [text.index(h) for h in ("## Task", "## Tool use", "## Output", "## Safety")]
    assert headings == sorted(headings)
    assert text.index("UNCERTAIN-7f3") > text.index("## Uncertainty")


def test_string_instructions_are_the_role() -> None:
    text, _ = render_system_prompt("  You are a travel clerk.  ")
    assert text.startswith("You are a travel clerk.\n")
    assert quiet_agent(instructions="You are a travel clerk.").system == text


def test_output_discipline_is_on_by_default() -> None:
    for text in (render_system_prompt()[0], quiet_agent().system):
        for line in DISCIPLINE_LINES:
            assert line in text
        # the discipline rules sit in the tool-use section, before the output format
        assert text.index("## Tool use") < text.index(DISCIPLINE_LINES[0]) < text.index("## Output")


@pytest.mark.parametrize(
    "make",
    [
        lambda: render_system_prompt(discipline=False)[0],
        lambda: render_system_prompt(PromptParts(discipline=False))[0],
        lambda: quiet_agent(instructions=PromptParts(discipline=False)).system,
        lambda: quiet_agent(instructions=PromptParts(role="A clerk.", discipline=False)).system,
    ],
    ids=["render", "parts", "agent", "agent-role"],
)
def test_output_discipline_can_be_switched_off(make: object) -> None:
    text = make()  # type: ignore[operator]
    assert all(line not in text for line in DISCIPLINE_LINES)
    assert "## Tool use" in text  # the other tool rules stay


# --- runtime block and the trace --------------------------------------------------------


def test_tool_summary_is_name_and_first_description_line() -> None:
    assert tool_summary([lookup.definition, convert.definition]) == (
        "- lookup: Look a key up in the catalogue.\n- convert: Convert an amount to euros."
    )
    bare = ToolDefinition(name="ping", description="  ", parameters={"type": "object"})
    assert tool_summary([bare]) == "- ping: ping"
    assert tool_summary([]) == "(no tools)"


def test_runtime_block_carries_date_mode_and_tools() -> None:
    block = runtime_block([lookup.definition], mode="tools", today=date(2031, 2, 3))
    assert block == (
        "[runtime]\nyear: 2031\ntoday: 02-03 (Monday)\nmode: tools\ntools:\n"
        "- lookup: Look a key up in the catalogue.\n[/runtime]"
    )


def test_runtime_block_is_written_once_a_day_and_redone_for_any_change() -> None:
    day = date(2031, 2, 3)
    first = runtime_block([lookup.definition], mode="tools", today=day)
    # each run offers new definition objects: the same block, the very same string
    assert runtime_block([lookup.definition], mode="tools", today=day) is first
    assert "02-04" in runtime_block([lookup.definition], mode="tools", today=date(2031, 2, 4))
    assert "mode: chat" in runtime_block([lookup.definition], mode="chat", today=day)
    renamed = ToolDefinition(name="find", description="Find it.", parameters={})
    assert "- find: Find it." in runtime_block([renamed], mode="tools", today=day)
    # long descriptions are not kept, and still read the same
    long = ToolDefinition(name="big", description="Big. " * 20_000, parameters={})
    block = runtime_block([long], mode="tools", today=day)
    assert "- big: Big. Big." in block
    assert runtime_block([long], mode="tools", today=day) is not block


def day_lines(day: date) -> str:
    return f"year: {day.year}\ntoday: {day:%m-%d} ({day:%A})\n"


def run_started(agent: Agent) -> tuple[dict[str, object], date]:
    before = date.today()
    result = agent.run_sync("What is the value of k?")
    assert result.trace is not None and result.stop_reason == "final_answer"
    started = next(e for e in read_trace(result.trace) if e["kind"] == "run_started")
    return started, before


def test_run_started_records_template_and_runtime(tmp_path: Path) -> None:
    model = ScriptedModel([{"text": "ok"}])
    agent = Agent(model, tools=[lookup, convert], trace_dir=tmp_path)
    started, before = run_started(agent)
    template = load_template("system")
    prompt = started["prompt"]
    assert isinstance(prompt, dict)
    assert (prompt["name"], prompt["version"]) == ("system", 1)
    assert len(prompt["sha256"]) >= 16 and template.sha256.startswith(prompt["sha256"])
    assert started["system"] == agent.system
    runtime = started["runtime"]
    assert isinstance(runtime, str)
    today = {before, date.today()}
    assert any(day_lines(d) in runtime for d in today)
    assert "mode: tools" in runtime
    assert tool_summary([lookup.definition, convert.definition]) in runtime
    assert "case-sensitive" not in runtime  # only the first description line
    # the recorded runtime block is exactly what preceded the user's message
    assert model.requests[0].messages[0].content == f"{runtime}\n\nWhat is the value of k?"


def test_run_started_records_a_user_template_version(tmp_path: Path) -> None:
    directory = user_prompts(tmp_path, {"system@2.md": V2})
    template = load_template("system", directory=directory)
    agent = Agent(
        ScriptedModel([{"text": "ok"}]), prompt_template=template, trace_dir=tmp_path / "t"
    )
    started, _ = run_started(agent)
    prompt = started["prompt"]
    assert isinstance(prompt, dict)
    assert (prompt["name"], prompt["version"]) == ("system", 2)
    assert hashlib.sha256(V2.encode()).hexdigest().startswith(prompt["sha256"])
    assert str(started["system"]).startswith("v2 prompt. You are Pi")
    assert "mode: chat" in str(started["runtime"]) and "(no tools)" in str(started["runtime"])
