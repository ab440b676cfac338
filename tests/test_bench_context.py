"""`pi bench context`: the contract JSON, and that the builder really bounds the input."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

from cli_support import pi_inprocess


def test_bench_context_prints_contract_rows_and_meets_its_target(tmp_path: Path) -> None:
    done = pi_inprocess("bench", "context", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bench"] == "context"
    for row in result["rows"]:
        assert {"case", "turn", "naive_input_tokens", "pi_input_tokens"} <= row.keys()
    rows = [r for r in result["rows"] if r["case"] == "long-run"]
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


def test_bench_context_shows_proactive_compression_on_a_session_under_the_default_budget(
    tmp_path: Path,
) -> None:
    done = pi_inprocess("bench", "context", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "session (5 user turns, default budget of 128,000)" in done.stdout
    result = json.loads((tmp_path / "context.json").read_text(encoding="utf-8"))
    rows = [r for r in result["rows"] if r["case"] == "session"]
    assert [r["turn"] for r in rows] == [1, 2, 3, 4, 5]
    # the first turn has nothing to digest; each later one sends less than the full history
    assert rows[0]["pi_input_tokens"] == rows[0]["naive_input_tokens"]
    assert rows[0]["pi_steps"] == "-"
    for row in rows[1:]:
        assert row["pi_input_tokens"] < row["naive_input_tokens"]
        assert row["pi_steps"] == "digest_consumed"  # no window was needed: the budget is roomy
    # without it the history grows a whole turn each time; with it only by digests and answers
    for a, b in pairwise(rows):
        grew = b["pi_input_tokens"] - a["pi_input_tokens"]
        assert grew < (b["naive_input_tokens"] - a["naive_input_tokens"]) / 4
    session = result["session"]
    assert session["context_window"] == 128_000
    assert session["with_proactive_total"] == sum(r["pi_input_tokens"] for r in rows)
    assert session["without_proactive_total"] == sum(r["naive_input_tokens"] for r in rows)
    assert session["share"] < 0.5
    csv = (tmp_path / "context.csv").read_text(encoding="utf-8")
    assert csv.splitlines()[0].startswith("case,turn,") and csv.count("\nsession,") == 5
