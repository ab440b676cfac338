"""`pi bench context`: the contract JSON, and that the builder really bounds the input."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import pi_inprocess


def test_bench_context_prints_contract_rows_and_meets_its_target(tmp_path: Path) -> None:
    done = pi_inprocess("bench", "context", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bench"] == "context"
    rows = result["rows"]
    assert [r["turn"] for r in rows] == list(range(1, 31))
    for row in rows:
        assert {"turn", "naive_input_tokens", "pi_input_tokens"} <= row.keys()
        assert row["pi_input_tokens"] <= row["naive_input_tokens"]
    # the naive side grows every turn; Pi's stays under the budget's room for input
    naive = [r["naive_input_tokens"] for r in rows]
    assert naive == sorted(naive) and len(set(naive)) == len(naive)
    room = result["budget"]["context_window"] - result["budget"]["output_reserve"]
    assert max(r["pi_input_tokens"] for r in rows) <= room
    assert result["naive_total"] == sum(naive)
    assert result["pi_share"] <= 0.40
    assert any("window" in r["pi_steps"] for r in rows)
    assert (tmp_path / "context.csv").exists() and (tmp_path / "context.json").exists()
