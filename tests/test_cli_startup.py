"""`pi --help` starts without the heavy parts of Pi, and `pi bench startup` reports the
cold start in the shape every bench uses (timings are the bench's business, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pi_runtime.cli import app
from pi_runtime.cli.qrp import KINDS
from pi_runtime.qrp1 import KINDS as CODEC_KINDS

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("pydantic", "sqlalchemy", "jsonschema", "pi_runtime.loop", "pi_runtime.durable")


def test_importing_the_cli_leaves_the_runtime_unloaded() -> None:
    code = f"import sys, pi_runtime.cli; print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.strip() == "[]"


def fresh_cli(argv: list[str], watched: tuple[str, ...]) -> tuple[str, list[str]]:
    """`pi *argv` in a new process: what it printed, and which of `watched` it loaded."""
    code = (
        f"import json, sys, contextlib, io; sys.argv = ['pi', *{argv!r}]\n"
        "from pi_runtime.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        f"print(json.dumps([out.getvalue(), [m for m in {watched!r} if m in sys.modules]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": SRC, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        check=True,
    )
    printed, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return printed, loaded


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["trace", "show", "--help"]])
def test_help_leaves_the_runtime_unloaded(argv: list[str]) -> None:
    # typer coerces an absent --help flag of a group through pydantic unless it is False
    printed, loaded = fresh_cli(argv, HEAVY)

    assert "Usage" in printed
    assert loaded == []


def test_a_run_without_a_store_never_loads_one(tmp_path: Path) -> None:
    # a third of a scripted `pi run`'s CPU went to importing the store it did not use
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "hello"}]}), encoding="utf-8")
    argv = ["run", "hi", "--model", f"scripted:{script}", "--trace-dir", str(tmp_path)]

    printed, loaded = fresh_cli(argv, ("sqlalchemy", "pi_runtime.durable"))

    assert printed.strip() == "hello"
    assert loaded == []


def test_the_cli_spells_the_qrp_kinds_as_the_codec_does() -> None:
    assert KINDS == CODEC_KINDS


def test_bench_startup_prints_one_row_per_system_with_the_ratio(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "startup", "--repeat", "1", "--out", str(tmp_path), "--json"]
    )

    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["bench"] == "startup"
    systems = {row["system"] for row in data["rows"]} | set(data["unavailable"])
    assert {"pi --help", "pi_runtime", "pydantic-ai", "openai-agents"} <= systems
    for row in data["rows"]:
        assert {"system", "median_ms", "runs", "ratio_to_pydantic_ai"} <= set(row)
    assert (tmp_path / "startup.json").exists()
    assert (tmp_path / "startup.csv").exists()
    measured_peers = {"pydantic-ai": "pydantic-ai-slim", "openai-agents": "openai-agents"}
    expected = {"python", "pi-runtime"} | {
        dist for system, dist in measured_peers.items() if system not in data["unavailable"]
    }
    assert set(data["versions"]) == expected
