"""`pi trace show` reads lines back as typed events, and shows what it cannot type.

A line of a known kind with missing fields (a hand-made or cut trace), a kind from a newer
Pi, or a `t_ms` that is not a number used to end in a KeyError or ValueError traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pi_runtime import Agent, tool
from pi_runtime.models import ModelRequest
from pi_runtime.testing import FunctionModel

PI = Path(sys.executable).parent / "pi"


def show(trace: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run(
        [str(PI), "trace", "show", str(trace)],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def test_lines_it_cannot_type_are_shown_as_their_fields_not_a_traceback(tmp_path: Path) -> None:
    trace = tmp_path / "hand.jsonl"
    trace.write_text(
        '{"kind": "run_started"}\n'
        '{"kind": "tool_result", "name": "lookup_x"}\n'
        '{"kind": "from_a_newer_pi", "detail": "newer_y", "t_ms": "soon"}\n',
        encoding="utf-8",
    )

    proc = show(trace)

    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "lookup_x" in proc.stdout
    assert "from_a_newer_pi" in proc.stdout and "newer_y" in proc.stdout


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    raise ValueError(f"no such city: {city}")


def test_a_run_with_a_failing_tool_reads_as_its_timeline(tmp_path: Path) -> None:
    def respond(request: ModelRequest) -> dict[str, object]:
        if request.step == 0:
            return {"tool_calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}
        return {"text": "sorry"}

    result = Agent(FunctionModel(respond), tools=[lookup], trace_dir=tmp_path).run_sync("go")
    assert result.trace is not None

    proc = show(Path(result.trace))

    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "model function:respond · tools lookup" in out
    assert "lookup [" in out and "error" in out
    assert "completed · final_answer · 2 steps" in out


def test_a_trace_that_cannot_be_read_is_named_once_with_its_reason(tmp_path: Path) -> None:
    fifo, missing = tmp_path / "fifo.jsonl", tmp_path / "missing.jsonl"
    os.mkfifo(fifo)
    for path, reason in ((fifo, "not a regular file but a FIFO"), (missing, "No such file")):
        shown = show(path)
        assert shown.returncode == 2 and shown.stdout == ""
        assert shown.stderr.count(str(path)) == 1 and reason in shown.stderr
