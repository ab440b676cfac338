"""`pi bench qrp`: the seed's payload experiment prints its rows and beats the seed's floor.

Sizes here are deterministic (synthetic data, exact tokenizer), so they are asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi_inprocess
from pi_runtime.bench import qrp as bench
from pi_runtime.qrp1 import parse

PI = Path(sys.executable).parent / "pi"
ROW_FIELDS = {"case", "rows", "json_bytes", "qrp_bytes", "json_tokens", "qrp_tokens"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [str(PI), "bench", "qrp", "--json", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def rows_of(result: dict[str, Any], case: str) -> list[dict[str, Any]]:
    return [r for r in result["rows"] if r["case"] == case]


def test_json_output_is_one_object_with_every_row_field(run: tuple[dict[str, Any], Path]) -> None:
    result, out = run
    assert result["bench"] == "qrp"
    assert all(row.keys() >= ROW_FIELDS for row in result["rows"])
    assert [r["case"] for r in result["rows"]] == [
        "klines", "klines", "klines", "klines", "products",
        "relay-json", "relay-qrp", "relay-locator",
    ]  # fmt: skip
    assert [r["rows"] for r in rows_of(result, "klines")] == [1, 500, 5_000, 10_000]
    assert {Path(f).name for f in result["files"]} == {"qrp.json", "qrp.csv", "qrp.png"}
    assert all((out / name).stat().st_size > 0 for name in ("qrp.json", "qrp.csv", "qrp.png"))


def test_klines_beat_the_seed_floor_at_5000_rows(run: tuple[dict[str, Any], Path]) -> None:
    (row,) = [r for r in rows_of(run[0], "klines") if r["rows"] == 5_000]
    assert row["pages"] == 10
    assert row["qrp_bytes"] < row["json_bytes"] and row["qrp_tokens"] < row["json_tokens"]
    assert row["bytes_saved_pct"] >= 59.6
    assert row["tokens_saved_pct"] >= 47.1


def test_products_table_is_smaller_than_json_and_paths_are_larger(
    run: tuple[dict[str, Any], Path],
) -> None:
    (row,) = rows_of(run[0], "products")
    assert row["qrp_bytes"] < row["json_bytes"] and row["qrp_tokens"] < row["json_tokens"]
    assert row["paths_bytes"] > row["json_bytes"], "the seed's path expansion grows the list"


def test_relays_rank_locator_then_qrp_then_json(run: tuple[dict[str, Any], Path]) -> None:
    (plain,), (qrp,), (locator,) = (
        rows_of(run[0], c) for c in ("relay-json", "relay-qrp", "relay-locator")
    )
    assert plain["qrp_tokens"] == plain["json_tokens"] == qrp["json_tokens"]
    assert locator["qrp_tokens"] < 100 < qrp["qrp_tokens"] < plain["qrp_tokens"]


def test_markdown_table_is_printed_without_json(tmp_path: Path) -> None:
    done = pi_inprocess("bench", "qrp", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| case | rows | JSON bytes | QRP1 bytes |")
    assert any(line.startswith("| klines | 5,000 |") for line in lines)
    assert any(line.startswith("| relay-locator | 5,000 |") for line in lines)


def test_both_sides_of_a_page_carry_the_same_metadata() -> None:
    rows = bench.klines(1_200)
    as_json, as_qrp = bench.kline_pages(rows)
    assert len(as_json) == len(as_qrp) == 3
    for index, (plain, compact) in enumerate(zip(as_json, as_qrp, strict=True)):
        envelope, document = json.loads(plain), parse(compact)
        header = document.header
        assert (header.source, header.snapshot, header.range) == (
            envelope["source"], envelope["snapshot"], envelope["range"],
        )  # fmt: skip
        assert (header.page, header.pages, header.offset, header.total) == (
            envelope["page"], envelope["pages"], envelope["offset"], envelope["total"],
        )  # fmt: skip
        assert header.next == envelope.get("next_cursor")
        assert document.value == envelope["rows"]
        last = index == len(as_json) - 1
        assert (header.next is None) == last
        assert last or len(header.next.encode()) == 384  # type: ignore[union-attr]


def test_synthetic_data_is_deterministic() -> None:
    assert bench.klines(50) == bench.klines(50)
    assert bench.products(20) == bench.products(20)
    assert len(bench.cursor()) == 384 and bench.cursor() == bench.cursor()
