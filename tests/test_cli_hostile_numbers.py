"""Numbers the command line reads that no float holds: refused or shown as unknown, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import pi

TOOLS = '''
from pi_runtime import tool

@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"

TOOLS = [refund]
'''


@pytest.mark.parametrize(
    "t_ms", ["9" * 400, "-" + "9" * 400, "1e999", "NaN"], ids=["huge", "-huge", "inf", "nan"]
)
def test_trace_show_marks_a_time_no_float_holds_as_unknown(tmp_path: Path, t_ms: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(f'{{"kind": "custom", "seq": 1, "t_ms": {t_ms}}}\n', encoding="utf-8")

    ran = pi("trace", "show", str(trace), tmp=tmp_path, expect=0)

    assert "custom" in ran.stdout and "?" in ran.stdout


@pytest.mark.parametrize("lease", ["inf", "1e308", "nan", "86401"])
def test_approve_refuses_a_lease_past_a_day_and_runs_nothing(tmp_path: Path, lease: str) -> None:
    (tmp_path / "leasetools.py").write_text(TOOLS, encoding="utf-8")
    steps = [{"tool_calls": [{"name": "refund", "arguments": {"order_id": "A"}}]}]
    script = {"steps": [*steps, {"text": "done"}]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    agent = tmp_path / "agent.toml"
    agent.write_text('model = "scripted:script.json"\ntools = ["leasetools:TOOLS"]\n')
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    pi("run", "hi", "--agent", str(agent), "--session", "s1", "--db", db, tmp=tmp_path, expect=3)

    ran = pi("approve", "s1", "call_0_0", "--lease", lease, "--db", db, tmp=tmp_path, expect=2)

    assert "--lease" in ran.stderr
    shown = pi("session", "show", "s1", "--db", db, "--json", tmp=tmp_path, expect=0)
    assert json.loads(shown.stdout)["status"] == "awaiting_approval"
