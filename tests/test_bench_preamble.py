"""`pi bench preamble`: contract rows, and the metrics move the way the runs did."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import pi_inprocess

METRICS = (
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
)


def test_bench_preamble_rows_cover_every_switch_and_report_the_four_metrics(tmp_path: Path) -> None:
    done = pi_inprocess(
        "bench", "preamble", "--no-local", "--json", "--out", str(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bench"] == "preamble"
    rows = {(r["model"], r["discipline"], r["tool_choice"]): r for r in result["rows"]}
    assert set(rows) == {("scripted", d, t) for d in (False, True) for t in (False, True)}
    for row in rows.values():
        assert all(name in row for name in METRICS)
        assert row["stop_reason"] == "final_answer"
    off = rows[("scripted", False, False)]
    disciplined = rows[("scripted", True, False)]
    forced = rows[("scripted", False, True)]
    # the restating model overran max_tokens once: the voided call is counted
    assert off["tool_argument_truncation_count"] == 1
    assert (
        disciplined["text_tokens_before_first_tool_call"]
        < off["text_tokens_before_first_tool_call"] / 50
    )
    assert forced["text_tokens_before_first_tool_call"] == 0
    assert forced["mixed_text_tool_message_rate"] == 0.0
    assert (tmp_path / "preamble.csv").exists()
