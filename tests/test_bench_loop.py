"""`pi bench loop`: the JSON contract, the files it writes, and the peers' shared workload.

Benchmarks are programs: these tests check what they print and write, never their timings.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from cli_support import Ran, pi_inprocess, pi_process
from pi_runtime.bench import peers

TURNS = (3, 5)
ALL_SYSTEMS = ("pi", "pydantic-ai", "openai-agents")
PEER_DISTS = ("pydantic-ai-slim", "openai-agents")  # the bench extra installs these
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def pi_bench(*args: str, cwd: Path, process: bool = False) -> Ran:
    """`pi bench loop ARGS` in-process, or with `process` as the console script."""
    if process:
        done = pi_process("bench", "loop", *args, cwd=cwd)
        return Ran(done.returncode, done.stdout, done.stderr)
    return pi_inprocess("bench", "loop", *args, cwd=cwd)


def bench_json(out: Path, *extra: str, process: bool = False) -> dict[str, Any]:
    """Run the bench with `--json`; stdout must be exactly one JSON object."""
    turns = ",".join(str(t) for t in TURNS)
    proc = pi_bench(
        "--turns", turns, "--repeat", "1", "--json", "--out", str(out), *extra,
        cwd=out.parent, process=process,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def with_peers(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench") / "results"
    return bench_json(out, process=True), out  # the bench as the program users run


def test_bench_loop_json_has_the_contract_rows(with_peers: tuple[dict[str, Any], Path]) -> None:
    data, _ = with_peers

    assert data["bench"] == "loop"
    assert data["rows"]
    for row in data["rows"]:
        assert {"system", "turns", "per_turn_us"} <= row.keys()
        assert row["system"] in ALL_SYSTEMS
        assert row["turns"] in TURNS
        assert isinstance(row["per_turn_us"], int | float)
        assert row["per_turn_us"] > 0


def test_installed_peers_are_measured_on_every_turn_count(
    with_peers: tuple[dict[str, Any], Path],
) -> None:
    data, _ = with_peers

    points = sorted((r["system"], r["turns"]) for r in data["rows"])
    assert points == sorted((s, t) for s in ALL_SYSTEMS for t in TURNS)
    assert data.get("unavailable", {}) == {}


def test_the_result_names_the_release_of_python_pi_and_each_peer_it_ran(
    with_peers: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    data, out = with_peers

    # a ratio holds for the peer's release: the result says which one it was
    assert data["versions"] == {
        "python": platform.python_version(),
        "pi-runtime": metadata.version("pi-runtime"),
        **{dist: metadata.version(dist) for dist in PEER_DISTS},
    }
    assert (
        json.loads((out / "loop.json").read_text(encoding="utf-8"))["versions"]
        == (data["versions"])
    )
    alone = bench_json(tmp_path / "results", "--no-peers")
    assert set(alone["versions"]) == {"python", "pi-runtime"}  # only what it measured
    shown = pi_bench("--turns", "3", "--repeat", "1", "--no-peers", "--out", str(tmp_path),
                     cwd=tmp_path)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"python {platform.python_version()}, pi-runtime " in " ".join(shown.stdout.split())


def test_bench_loop_writes_csv_json_and_png(with_peers: tuple[dict[str, Any], Path]) -> None:
    data, out = with_peers

    written = json.loads((out / "loop.json").read_text(encoding="utf-8"))
    assert written["bench"] == "loop"
    assert written["rows"] == data["rows"]
    with (out / "loop.csv").open(newline="", encoding="utf-8") as handle:
        csv_rows = list(csv.DictReader(handle))
    assert [(r["system"], int(r["turns"])) for r in csv_rows] == [
        (r["system"], r["turns"]) for r in data["rows"]
    ]
    assert all(float(r["per_turn_us"]) > 0 for r in csv_rows)
    assert (out / "loop.png").is_file() == HAS_MATPLOTLIB
    if HAS_MATPLOTLIB:
        assert (out / "loop.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_peers_measures_pi_only(tmp_path: Path) -> None:
    data = bench_json(tmp_path / "results", "--no-peers")

    assert data["bench"] == "loop"
    assert {r["system"] for r in data["rows"]} == {"pi"}
    assert sorted(r["turns"] for r in data["rows"]) == list(TURNS)
    assert (tmp_path / "results" / "loop.csv").is_file()


@pytest.mark.parametrize("turns", ["1", "a,b", "3,,5", "5,-2", ""])
def test_bad_turns_exits_2_before_measuring(tmp_path: Path, turns: str) -> None:
    out = tmp_path / "results"
    proc = pi_bench("--turns", turns, "--json", "--no-peers", "--out", str(out), cwd=tmp_path)

    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "--turns" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("system", peers.PEERS)
def test_peer_workload_calls_the_tool_on_all_but_the_last_turn(system: str) -> None:
    assert peers.peer_available(system) is None

    per_turn_us = peers.run_peer(system, 4)

    assert per_turn_us > 0
    assert hasattr(peers, "LAST_TOOL_CALLS")
    assert peers.LAST_TOOL_CALLS == 3


def test_peers_are_the_contract_systems() -> None:
    assert set(peers.PEERS) == set(ALL_SYSTEMS) - {"pi"}


def test_unknown_peer_and_zero_turns_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown peer"):
        peers.run_peer("langchain", 4)
    with pytest.raises(ValueError, match="unknown peer"):
        peers.peer_available("langchain")
    with pytest.raises(ValueError, match="turns"):
        peers.run_peer(peers.PEERS[0], 0)


def test_the_default_rows_start_with_a_short_run_and_the_command_agrees() -> None:
    # most runs are short: their fixed cost is measured against the peers by default
    import inspect

    from pi_runtime.bench.loop import DEFAULT_TURNS
    from pi_runtime.cli.bench import bench_loop

    default = inspect.signature(bench_loop).parameters["turns"].default
    assert tuple(int(t) for t in default.split(",")) == DEFAULT_TURNS
    assert min(DEFAULT_TURNS) == 2 and 200 in DEFAULT_TURNS
