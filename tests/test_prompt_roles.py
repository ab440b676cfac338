"""Prompt roles (router, planner, executor, reflector, summariser) as versioned templates,
and the skeleton presets of seed 001 §4.3."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import BaseModel

import pi_runtime.context as context_package
from pi_runtime import Agent, UserError, tool
from pi_runtime.context import (
    INJECTION_REPLY,
    PRESETS,
    ROLES,
    ModelSummariser,
    PromptParts,
    load_template,
    model_summariser,
    render_role,
    render_system_prompt,
)
from pi_runtime.testing import ScriptedModel

PROMPTS = Path(context_package.__file__).parent / "prompts"


@tool
def lookup(city: str) -> str:
    """Weather of a city.

    Second line that the summary leaves out.
    """
    return city


class Answer(BaseModel):
    text: str


@pytest.mark.parametrize("name", [*ROLES, "summariser"])
def test_every_role_is_a_builtin_template_at_version_1(name: str) -> None:
    template = load_template(name)

    assert (template.name, template.version) == (name, 1)
    file = PROMPTS / f"{name}@1.md"
    assert template.sha256 == hashlib.sha256(file.read_bytes()).hexdigest()


@pytest.mark.parametrize("role", ROLES)
def test_a_role_prompt_carries_the_agents_role_and_task(role: str) -> None:
    parts = PromptParts(role="ROLE-9c1", task="TASK-9c1")

    prompt = render_role(role, parts, tools=[lookup.definition], values={"max_plan_steps": "7"})  # type: ignore[arg-type]

    assert prompt.text.startswith("ROLE-9c1\n")
    assert prompt.ref == load_template(role).ref
    assert "$" not in prompt.text  # every placeholder filled


def test_the_planner_and_router_list_the_tools_the_executor_gets_the_rules() -> None:
    parts = PromptParts(presets=("no_pii", "answer_sections_zh"), output_format="OUTPUT-9c1")
    tools = [lookup.definition]

    planner = render_role("planner", parts, tools=tools, values={"max_plan_steps": "7"})
    router = render_role("router", parts, tools=tools)
    executor = render_role("executor", parts, tools=tools)

    assert "- lookup: Weather of a city." in planner.text and "1 to 7 steps" in planner.text
    assert "- lookup: Weather of a city." in router.text
    assert '"direct" | "react" | "plan"' in router.text
    # the executor keeps the agent's rules and safety presets, not its answer's format:
    # a step reports to the next step, the final answer is composed later
    assert PRESETS["no_pii"].text in executor.text
    assert "OUTPUT-9c1" not in executor.text and "摘要" not in executor.text


def test_the_preset_names_are_a_public_format_that_never_changes() -> None:
    assert list(PRESETS) == [
        "max_tools_5",
        "confirm_irreversible",
        "answer_sections_zh",
        "answer_sections_en",
        "no_pii",
        "injection_reply",
        "contradictions_to_human",
    ]


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_adds_its_line_to_its_own_part(name: str) -> None:
    plain, _ = render_system_prompt(PromptParts())
    text, _ = render_system_prompt(PromptParts(presets=(name,)))

    preset = PRESETS[name]
    assert preset.text not in plain and text.count(preset.text) == 1
    heading = {
        "tool_rules": "## Tool use",
        "output_format": "## Output",
        "safety": "## Safety",
        "uncertainty": "## Uncertainty",
    }[preset.section]
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    assert preset.text in section
    assert text.replace(preset.text + "\n", "") == plain


def test_seed_001s_skeleton_rules_say_what_the_seed_asks() -> None:
    text, _ = render_system_prompt(PromptParts(presets=tuple(PRESETS)))

    for needle in (
        "at most 5 tools in one reply",
        "money or deletes data, call the `confirm` tool first",
        "`## 摘要`, `## 详情`, `## 行动项`",
        "phone numbers, ID card numbers, email addresses",
        f'reply only with "{INJECTION_REPLY}"',
        "hand the case to a human reviewer",
    ):
        assert needle in text


def test_presets_are_placed_in_one_order_however_they_are_listed() -> None:
    one = PromptParts(presets=("no_pii", "max_tools_5", "injection_reply"))
    other = PromptParts(presets=["injection_reply", "no_pii", "max_tools_5", "no_pii"])  # type: ignore[arg-type]

    assert one.presets == other.presets == ("max_tools_5", "no_pii", "injection_reply")
    assert render_system_prompt(one) == render_system_prompt(other)


@pytest.mark.parametrize(
    ("presets", "message"),
    [
        (("no_pi",), r"unknown prompt preset 'no_pi'; known presets: max_tools_5, "),
        ("no_pii", "must be a list of preset names"),
    ],
)
def test_a_bad_preset_is_a_user_error(presets: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        PromptParts(presets=presets)  # type: ignore[arg-type]


def test_a_free_text_shape_preset_clashes_with_an_output_contract() -> None:
    parts = PromptParts(presets=("answer_sections_en", "no_pii"))

    with pytest.raises(UserError, match="answer_sections_en shapes a free-text answer"):
        Agent(ScriptedModel([]), instructions=parts, output=Answer, trace_dir=False)
    ok = Agent(
        ScriptedModel([]),
        instructions=PromptParts(presets=("no_pii",)),
        output=Answer,
        trace_dir=False,
    )
    assert PRESETS["no_pii"].text in ok.system


def test_presets_come_from_an_agent_files_instructions(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text('{"steps": []}', encoding="utf-8")
    (tmp_path / "agent.toml").write_text(
        'model = "scripted:script.json"\n'
        '[instructions]\nrole = "You book trips."\npresets = ["no_pii", "max_tools_5"]\n',
        encoding="utf-8",
    )

    agent = Agent.from_file(tmp_path / "agent.toml", trace_dir=False)

    assert PRESETS["no_pii"].text in agent.system and PRESETS["max_tools_5"].text in agent.system
    assert agent.definition is not None
    assert agent.definition.to_dict()["instructions"]["presets"] == ["no_pii", "max_tools_5"]


def test_an_unknown_preset_in_an_agent_file_names_the_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        '[instructions]\nrole = "You book trips."\npresets = ["no_pii", "be_nice"]\n',
        encoding="utf-8",
    )

    with pytest.raises(
        UserError, match=r"agent.toml:3: instructions.presets: unknown prompt preset 'be_nice'"
    ):
        Agent.from_file(tmp_path / "agent.toml", trace_dir=False)


def test_the_model_summariser_writes_under_its_template() -> None:
    summariser = model_summariser(ScriptedModel([{"text": "short"}]))

    assert isinstance(summariser, ModelSummariser)
    template = load_template("summariser")
    assert summariser.system == template.render({})
    assert summariser.prompt == template.ref
    assert "at most 200 words" in summariser.system
