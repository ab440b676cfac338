"""How far sub-agents may nest: a definition stores each child read in whole, so files
that name each other in a long chain, or name the next file twice at every level, are
refused with one clear error instead of a traceback or a definition doubling per level."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi_inprocess
from pi_runtime import UserError
from pi_runtime.loop import definition
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import AgentDefinition, DefinitionError

LEAF = "model = 'scripted:s.json'\n"


def chain(folder: Path, levels: int, *, names: tuple[str, ...] = ("next",)) -> Path:
    """Files a0 … aLEVELS, each naming the next one under each of `names`."""
    (folder / "s.json").write_text('{"steps": [{"text": "hi"}]}', encoding="utf-8")
    for i in range(levels):
        sections = "".join(
            f"[subagents.{name}]\nagent = 'a{i + 1}.toml'\ndescription = 'x'\n" for name in names
        )
        (folder / f"a{i}.toml").write_text(LEAF + sections, encoding="utf-8")
    (folder / f"a{levels}.toml").write_text(LEAF, encoding="utf-8")
    return folder / "a0.toml"


def stored_chain(levels: int) -> dict[str, Any]:
    """A stored definition whose sub-agents nest `levels` deep."""
    table: dict[str, Any] = {}
    for _ in range(levels):
        table = {"subagents": {"next": {"agent": table, "description": "x"}}}
    return table


def test_subagent_files_may_nest_eight_levels_not_nine(tmp_path: Path) -> None:
    (tmp_path / "eight").mkdir()
    assert read_agent_file(chain(tmp_path / "eight", 8)).subagents["next"]

    (tmp_path / "nine").mkdir()
    with pytest.raises(UserError) as caught:
        read_agent_file(chain(tmp_path / "nine", 9))
    text = str(caught.value)
    assert "a0.toml:3: subagents.next.agent: " in text and "\n" not in text
    assert "sub-agents nest more than 8 levels deep: a0.toml → a1.toml" in text


def test_pi_run_refuses_a_chain_of_250_agent_files_in_one_line(tmp_path: Path) -> None:
    top = chain(tmp_path, 250)

    ran = pi_inprocess("run", "--agent", str(top), "hi", cwd=tmp_path)

    assert ran.returncode == 2
    assert "sub-agents nest more than 8 levels deep" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_files_naming_the_next_one_twice_are_refused_before_they_double(
    tmp_path: Path,
) -> None:
    # 6 levels of two children each: 126 definitions, each stored whole
    with pytest.raises(UserError) as caught:
        read_agent_file(chain(tmp_path, 6, names=("left", "right")))
    assert "subagents: includes more than 64 sub-agents, theirs counted" in str(caught.value)


def test_a_file_named_twice_is_read_and_checked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = chain(tmp_path, 3, names=("left", "right"))
    parsed: list[str] = []
    checked: list[str] = []
    loads, model_rule = tomllib.loads, definition._RULES["model"]
    monkeypatch.setattr(tomllib, "loads", lambda text: parsed.append(text) or loads(text))
    monkeypatch.setitem(
        definition._RULES, "model", lambda key, value: checked.append(key) or model_rule(key, value)
    )

    read = read_agent_file(top)

    assert len(parsed) == 4 and len(checked) == 4  # a0 … a3, once each
    grandchild = read.subagents["right"]["agent"]["subagents"]["left"]["agent"]
    assert grandchild["subagents"]["left"]["agent"]["model"].endswith("s.json")


def test_a_stored_definition_nested_too_deep_is_refused_without_recursing() -> None:
    assert AgentDefinition.from_dict(stored_chain(8)).subagents  # the top and 8 levels

    with pytest.raises(DefinitionError) as caught:
        AgentDefinition.from_dict(stored_chain(250))
    assert caught.value.key == "subagents"
    assert caught.value.problem == "sub-agents nest more than 8 levels deep"


def test_a_stored_definition_with_too_many_subagents_is_refused() -> None:
    entries = {f"s{i}": {"agent": {}, "description": "x"} for i in range(65)}

    with pytest.raises(DefinitionError) as caught:
        AgentDefinition.from_dict({"subagents": entries})

    assert caught.value.key == "subagents" and "more than 64 sub-agents" in caught.value.problem
