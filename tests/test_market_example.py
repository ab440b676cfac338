"""The market example (seed 004): crossovers computed server-side from locator parameters,
equal to a direct computation, with no K-line ever in what the model is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, Limits, ModelRequest, ToolError, ToolResultMessage
from pi_runtime.data.memory import MemoryDataStore
from pi_runtime.data.plane import DataPlane
from pi_runtime.durable import open_store
from pi_runtime.observe.trace import read_trace
from pi_runtime.qrp1 import decode, parse
from pi_runtime.testing import FunctionModel

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the examples live beside the package, not inside it

from examples.market import source, tools  # noqa: E402

PI = Path(sys.executable).parent / "pi"
LOCATOR = {
    "source": "synthetic",
    "symbol": "BNBUSDT",
    "interval": "1h",
    "start": "2026-09-08T00:00:00Z",
    "end": "2027-04-04T08:00:00Z",
}
CASES = [("ma_cross", 20, 50), ("ema_cross", 12, 26)]


def direct(logic: str, fast: int, slow: int, bars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Crossovers computed over the whole series at once, from the definitions in
    examples/market/indicators.py (not with its code)."""
    cents = [round(bar["close"] * 100) for bar in bars]

    def averages(n: int) -> list[float | None]:
        out: list[float | None] = [None] * len(cents)
        if logic == "ma_cross":
            for i in range(n - 1, len(cents)):
                out[i] = sum(cents[i - n + 1 : i + 1]) / n
            return out
        alpha = 2 / (n + 1)
        previous = sum(cents[:n]) / n
        out[n - 1] = previous
        for i in range(n, len(cents)):
            previous = alpha * cents[i] + (1 - alpha) * previous
            out[i] = previous
        return out

    fast_avg, slow_avg = averages(fast), averages(slow)
    crossings, side = [], 0
    for i, bar in enumerate(bars):
        f, s = fast_avg[i], slow_avg[i]
        if f is None or s is None:
            continue
        if logic == "ma_cross":  # exactly, as integers
            now = (sum(cents[i - fast + 1 : i + 1]) * slow > sum(cents[i - slow + 1 : i + 1]) * fast) - (
                sum(cents[i - fast + 1 : i + 1]) * slow < sum(cents[i - slow + 1 : i + 1]) * fast
            )  # fmt: skip
        else:
            now = (f > s) - (f < s)
        if now and side and now != side:
            crossings.append(
                {"time": bar["time"], "signal": "golden" if now > 0 else "death",
                 "close": bar["close"], "fast": round(f / 100, 4), "slow": round(s / 100, 4)}
            )  # fmt: skip
        side = now or side
    return crossings


def all_rows(data: DataPlane, reference: str) -> list[Any]:
    """Every row of a result, read page by page through its cursors."""
    page = data.first_page(reference)
    rows = decode(page.text)
    while page.next is not None:
        page = data.read(page.next, reference=reference)
        rows += decode(page.text)
    return rows


def kline_fingerprints(bars: list[dict[str, Any]]) -> list[str]:
    """Spellings only a K-line row carries: its volume, and its QRP1 row."""
    return [repr(bar["volume"]) for bar in bars] + [
        f"{bar['open']!r},{bar['high']!r},{bar['low']!r},{bar['close']!r}" for bar in bars
    ]


@pytest.fixture
def memory_plane() -> Iterator[DataPlane]:
    data = DataPlane(MemoryDataStore(), owner="analyst", page_bytes=tools.PAGE_BYTES)
    tools.use_plane(data)
    yield data
    tools.use_plane(None)


def error_of(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)
    return parsed


# --- under `pi run`, in a subprocess ---------------------------------------------------------


def test_pi_run_completes_with_results_equal_to_a_direct_computation_and_no_klines(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'market.db'}"
    env = {**os.environ, "PI_TRACE_DIR": str(tmp_path), "PI_MARKET_DB": db,
           "PI_MARKET_OWNER": "analyst-7", "NO_COLOR": "1"}  # fmt: skip
    proc = subprocess.run(
        [str(PI), "run", "BNBUSDT 1h 最近 5000 根 K 线的 MA20/MA50 与 EMA12/EMA26 交叉？",
         "--model", "scripted:examples/market/script.json",
         "--tools", "examples.market.tools:TOOLS", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120,
        check=False,
    )  # fmt: skip

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["status"], result["stop_reason"]) == ("completed", "final_answer")
    results = [m for m in result["messages"] if m["role"] == "tool"]
    assert [r["is_error"] for r in results] == [False, False]

    bars = source.bars(LOCATOR["symbol"], LOCATOR["interval"], LOCATOR["start"], LOCATOR["end"])
    assert len(bars) == 5_000
    store = open_store(db)
    try:
        data = DataPlane(store, owner="analyst-7")
        for message, (logic, fast, slow) in zip(results, CASES, strict=True):
            header = parse(message["content"]).header
            assert header.kind == "table" and header.extra["x-summary"].startswith("5000 bars")
            assert all_rows(data, header.extra["x-ref"]) == direct(logic, fast, slow, bars)
            assert data.rows(header.extra["x-input"], kind="klines") == bars
        with pytest.raises(ToolError, check=lambda e: e.kind == "reference_forbidden"):
            data.for_owner("someone-else").rows(parse(results[0]["content"]).header.extra["x-ref"])
    finally:
        store.close()

    # What the model was sent: every message of the run, as the trace recorded it.
    events = read_trace(result["trace"])
    sent = "\n".join(
        json.dumps(e["message"], ensure_ascii=False) for e in events if e["kind"] == "message"
    )
    assert sum(1 for e in events if e["kind"] == "model_request") == 2
    assert not [f for f in kline_fingerprints(bars) if f in sent]
    assert "volume" not in sent and "high:" not in sent
    assert len(sent.encode()) < 20_000  # the bars alone are ~600 kB of JSON


# --- in process ------------------------------------------------------------------------------


@pytest.mark.parametrize(("logic", "fast", "slow"), CASES)
def test_compute_equals_a_direct_computation(
    memory_plane: DataPlane, logic: str, fast: int, slow: int
) -> None:
    text = tools.compute.function(logic=logic, fast=fast, slow=slow, **LOCATOR)

    header = parse(text).header
    bars = source.bars(LOCATOR["symbol"], LOCATOR["interval"], LOCATOR["start"], LOCATOR["end"])
    expected = direct(logic, fast, slow, bars)
    assert all_rows(memory_plane, header.extra["x-ref"]) == expected
    golden = sum(1 for c in expected if c["signal"] == "golden")
    assert f"{len(expected)} crossovers ({golden} golden" in header.extra["x-summary"]
    assert len(text.encode()) <= tools.PAGE_BYTES and header.next is not None


def test_a_model_reads_every_page_by_cursor_and_never_sees_a_kline(
    memory_plane: DataPlane,
) -> None:
    requests: list[ModelRequest] = []
    reference: str | None = None

    def model(request: ModelRequest) -> dict[str, Any]:
        nonlocal reference
        requests.append(request)
        if request.step == 0:
            args = {"logic": "ma_cross", "fast": 20, "slow": 50, **LOCATOR}
            return {"tool_calls": [{"name": "compute", "arguments": args}]}
        last = request.messages[-1]
        assert isinstance(last, ToolResultMessage) and not last.is_error, last
        header = parse(last.content).header
        reference = reference or header.extra["x-ref"]
        if header.next is None:
            return {"text": "done"}
        args = {"result": reference, "cursor": header.next}
        return {"tool_calls": [{"name": "read_result", "arguments": args}]}

    result = Agent(FunctionModel(model), tools=tools.TOOLS, limits=Limits(max_steps=20)).run_sync(
        "crossovers?"
    )

    assert result.status == "completed", result.stop_reason
    pages = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    bars = source.bars(LOCATOR["symbol"], LOCATOR["interval"], LOCATOR["start"], LOCATOR["end"])
    assert len(pages) >= 2
    assert [row for page in pages for row in decode(page)] == direct("ma_cross", 20, 50, bars)
    sent = "\n".join(str(m) for r in requests for m in r.messages)
    assert not [f for f in kline_fingerprints(bars) if f in sent]


def test_compute_takes_a_klines_reference_bound_to_its_snapshot(
    memory_plane: DataPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = tools.read_klines.function(**{**LOCATOR, "end": "2026-10-08T00:00:00Z"})
    reference = parse(shown).header.extra["x-ref"]
    before = source.bars("BNBUSDT", "1h", LOCATOR["start"], "2026-10-08T00:00:00Z")

    monkeypatch.setattr(source, "REVISION", 2)  # the source's history is corrected
    by_reference = tools.compute.function(logic="ma_cross", fast=5, slow=20, klines=reference)
    by_locator = tools.compute.function(
        logic="ma_cross", fast=5, slow=20, **{**LOCATOR, "end": "2026-10-08T00:00:00Z"}
    )

    after = source.bars("BNBUSDT", "1h", LOCATOR["start"], "2026-10-08T00:00:00Z")
    assert before != after
    old = all_rows(memory_plane, parse(by_reference).header.extra["x-ref"])
    new = all_rows(memory_plane, parse(by_locator).header.extra["x-ref"])
    assert old == direct("ma_cross", 5, 20, before)  # the snapshot, not the newer data
    assert new == direct("ma_cross", 5, 20, after)
    assert parse(by_reference).header.extra["x-input"] == reference


def test_read_klines_pages_are_bound_to_their_query(memory_plane: DataPlane) -> None:
    first = parse(tools.read_klines.function(**LOCATOR)).header
    assert first.kind == "series" and first.step_ms == 3_600_000 and first.next

    second = tools.read_klines.function(**LOCATOR, cursor=first.next)
    assert parse(second).header.page == 2

    def call(arguments: dict[str, Any]) -> dict[str, Any]:
        model = FunctionModel(
            lambda r: (
                {"tool_calls": [{"name": "read_klines", "arguments": arguments}]}
                if r.step == 0
                else {"text": "ok"}
            )
        )
        result = Agent(model, tools=tools.TOOLS).run_sync("bars")
        message = result.messages[2]
        assert isinstance(message, ToolResultMessage) and message.is_error
        return error_of(message.content)

    seen = call({**LOCATOR, "symbol": "ETHUSDT", "cursor": first.next})
    assert seen["kind"] == "cursor_mismatch" and "symbol" in seen["message"] and seen["hint"]
    assert call({**LOCATOR, "cursor": first.next[:-2]})["kind"] == "cursor_invalid"


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        ({"logic": "ma_cross", "fast": 50, "slow": 20, **LOCATOR}, "invalid_arguments"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, **LOCATOR, "source": "nyse"}, "not_found"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, "symbol": "BNBUSDT"}, "invalid_arguments"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, **LOCATOR, "klines": "ref:x"},
         "invalid_arguments"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, "klines": "ref:ref-missing"},
         "reference_not_found"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, "klines": "BNBUSDT 1h"},
         "reference_invalid"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, **LOCATOR, "end": "2020-01-01T00:00:00Z"},
         "invalid_arguments"),
        ({"logic": "ma_cross", "fast": 5, "slow": 20, **LOCATOR, "interval": "1m"},
         "invalid_arguments"),  # too many bars
    ],
)  # fmt: skip
def test_bad_compute_calls_tell_the_model_what_to_fix(
    memory_plane: DataPlane, arguments: dict[str, Any], kind: str
) -> None:
    model = FunctionModel(
        lambda r: (
            {"tool_calls": [{"name": "compute", "arguments": arguments}]}
            if r.step == 0
            else {"text": "ok"}
        )
    )
    message = Agent(model, tools=tools.TOOLS).run_sync("go").messages[2]
    assert isinstance(message, ToolResultMessage) and message.is_error
    assert error_of(message.content)["kind"] == kind


def test_a_crossovers_reference_is_not_klines(memory_plane: DataPlane) -> None:
    text = tools.compute.function(logic="ema_cross", fast=12, slow=26, **LOCATOR)
    crossovers = parse(text).header.extra["x-ref"]
    with pytest.raises(ToolError, match="holds 'crossovers' data"):
        tools.compute.function(logic="ma_cross", fast=5, slow=20, klines=crossovers)
