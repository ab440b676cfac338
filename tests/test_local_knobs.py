"""The embedded engine's settings: `[local]` in agent files, `--local-*` flags, specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import pi_inprocess
from pi_runtime import UserError
from pi_runtime.loop.agentfile import read_agent_file
from pi_runtime.loop.definition import AgentDefinition, absolute_model
from pi_runtime.models import resolve_model
from pi_runtime.models.local import LocalModel

AGENT = """\
model = "local"
instructions = "You answer."
"""


def agent_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(AGENT + extra, encoding="utf-8")
    return path


def test_an_agent_files_local_table_reaches_the_engine(tmp_path: Path) -> None:
    path = agent_file(tmp_path, "\n[local]\nthreads = 1\ncontext = 4096\nmax_tokens = 300\n")
    definition = read_agent_file(path)

    agent = definition.build_agent(trace_dir=False)

    assert isinstance(agent.model, LocalModel)
    assert (agent.model.n_threads, agent.model.n_ctx, agent.model.max_tokens) == (1, 4096, 300)
    assert agent.model.context_window == 4096  # and the builder budgets for it


@pytest.mark.parametrize(
    ("table", "where", "problem"),
    [
        ("threads = 0", "local.threads", "at least 1, got 0"),
        ("context = 100", "local.context", "at least 512, got 100"),
        ('threads = "two"', "local.threads", "integer"),
        ("threads = true", "local.threads", "integer"),
        ("gpu = 1", "local.gpu", "unknown key"),
    ],
)
def test_a_bad_local_setting_names_the_file_and_key(
    tmp_path: Path, table: str, where: str, problem: str
) -> None:
    path = agent_file(tmp_path, f"\n[local]\n{table}\n")

    with pytest.raises(UserError) as caught:
        read_agent_file(path)

    assert str(path) in str(caught.value) and where in str(caught.value)
    assert problem in str(caught.value)


def test_flags_override_the_table_key_by_key() -> None:
    definition = AgentDefinition(model="local", local={"threads": 2, "context": 4096})

    merged = definition.with_overrides(local={"threads": 1})

    assert merged.local == {"threads": 1, "context": 4096}
    assert merged.same_agent(definition)  # a machine's engine settings are not the agent


def test_other_models_ignore_the_engines_settings(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"steps": [{"text": "ok"}]}', encoding="utf-8")

    model = resolve_model(f"scripted:{script}", local={"threads": 1})

    assert not isinstance(model, LocalModel)


def test_an_embedded_models_name_is_not_taken_for_a_path(tmp_path: Path) -> None:
    assert absolute_model("local:gemma-3-270m", tmp_path) == "local:gemma-3-270m"
    assert absolute_model("local:m.gguf", tmp_path) == f"local:{tmp_path / 'm.gguf'}"
    model = resolve_model("local:gemma-3-270m")
    assert isinstance(model, LocalModel) and model.embedded == "gemma-3-270m"


@pytest.mark.parametrize(
    ("flag", "value", "least"), [("--local-threads", "0", "1"), ("--local-context", "64", "512")]
)
def test_pi_run_refuses_engine_flags_out_of_range(
    tmp_path: Path, flag: str, value: str, least: str
) -> None:
    ran = pi_inprocess("run", "hi", flag, value, cwd=tmp_path)

    said = " ".join(ran.stderr.split())
    assert ran.returncode == 2 and flag in said and f"greater than or equal to {least}" in said
