"""`python -m examples.weather.demo` runs the very agent `agent.toml` defines (what
`make demo` runs), on the model asked for: here the agent file's own scripted one."""

from __future__ import annotations

from pathlib import Path

import pytest
from examples.weather import demo

SCRIPT = Path(demo.__file__).with_name("script.json")


def test_the_python_demo_runs_the_agent_files_agent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_TRACE_DIR", str(tmp_path / "traces"))

    code = demo.main(["--model", f"scripted:{SCRIPT}"])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "雷阵雨" in out and "提醒" in out
    assert "get_weather" in err and "create_reminder" in err
    assert "ended completed (final_answer) after 3 step(s)" in err


def test_the_python_demo_says_what_is_wrong_with_a_model_it_cannot_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = demo.main(["--model", "nosuchprovider:x"])

    assert code == 2
    assert "unknown model spec 'nosuchprovider:x'" in " ".join(capsys.readouterr().err.split())
