"""`pi bench loop`: runtime overhead per turn, Pi against its peers on the same workload.

Workload: one trivial async tool `noop(i) -> i`; the model calls it on turns 1..T-1 and answers
on turn T; the model does no work. Per-turn overhead = wall time of the run / T, each
system's agent built before its clock starts: at 2 turns that is mostly what every run
costs once (starting and ending it), the share that decides how fast short runs are.
Like the peers' scripted models (bench/peers.py), Pi's keeps no copies of the requests
and reports a fixed usage of one token in, one out.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

from ..loop import Agent, Limits
from ..messages import TextBlock, ToolCall, Usage
from ..models import ModelRequest, ModelResponse
from ..testing import FunctionModel
from ..tools import tool
from . import peers
from .versions import versions

DEFAULT_TURNS = (2, 50, 200, 1000)


@tool
async def noop(i: int) -> int:
    """Return i."""
    # async like the peers' noop: all three then skip the worker-thread hop for sync tools
    return i


def _respond(turns: int) -> Any:
    def respond(request: ModelRequest) -> ModelResponse:
        step = request.step
        usage = Usage(input_tokens=1, output_tokens=1)
        if step + 1 >= turns:
            return ModelResponse(
                content=(TextBlock(text="done"),), finish_reason="stop", usage=usage
            )
        raw = f'{{"i":{step}}}'
        return ModelResponse(
            content=(ToolCall(id=f"c{step}", name="noop", raw=raw, arguments={"i": step}),),
            finish_reason="tool_calls",
            usage=usage,
        )

    return respond


def run_pi(turns: int, *, trace_dir: str) -> float:
    """Per-turn overhead of Pi in µs (traces written, as in normal use)."""
    agent = Agent(
        FunctionModel(_respond(turns), keep_calls=False),
        tools=[noop],
        # overhead, not guards, is measured: a 1,000-turn run re-reads a growing context
        # past the default token budget, and may take longer than the default clock
        limits=Limits(max_steps=turns + 1, wall_clock_s=None, token_budget=None),
        trace_dir=trace_dir,
    )
    started = time.perf_counter()
    result = agent.run_sync("go")
    elapsed = time.perf_counter() - started
    if result.stop_reason != "final_answer" or result.steps != turns:
        raise RuntimeError(
            f"pi workload ended {result.stop_reason} after {result.steps} steps: {result.error}"
        )
    return elapsed / turns * 1e6


def measure(
    turns: tuple[int, ...] = DEFAULT_TURNS, *, repeat: int = 3, with_peers: bool = True
) -> dict[str, Any]:
    """Rows of {system, turns, per_turn_us} (median of `repeat` runs) and peer notes."""
    systems = ["pi"]
    notes: dict[str, str] = {}
    if with_peers:
        for name in peers.PEERS:
            missing = peers.peer_available(name)
            if missing is None:
                systems.append(name)
            else:
                notes[name] = missing
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as trace_dir:
        run_pi(5, trace_dir=trace_dir)  # warm-up: imports, tokenizer, first-call caches
        for system in systems:
            if system != "pi":
                peers.run_peer(system, 5)
            for count in turns:
                samples = [
                    run_pi(count, trace_dir=trace_dir)
                    if system == "pi"
                    else peers.run_peer(system, count)
                    for _ in range(repeat)
                ]
                rows.append(
                    {
                        "system": system,
                        "turns": count,
                        "per_turn_us": round(statistics.median(samples), 1),
                        "min_us": round(min(samples), 1),
                        "repeat": repeat,
                    }
                )
    for row in rows:
        pi_row = next(r for r in rows if r["system"] == "pi" and r["turns"] == row["turns"])
        row["ratio_to_pi"] = round(row["per_turn_us"] / pi_row["per_turn_us"], 2)
    measured = [peers.module_of(s) for s in systems if s != "pi"]
    return {"bench": "loop", "rows": rows, "unavailable": notes, "versions": versions(measured)}
