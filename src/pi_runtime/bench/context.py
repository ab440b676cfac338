"""`pi bench context`: input tokens over a long tool-heavy run, naive history vs Pi's builder.

Workload: a 30-turn scripted task; on each of the first 29 turns the model reads one page
(`read_page(n)`, about 1,500 tokens of text) and the last turn answers. The naive client
sends the full history every turn, so its total grows as N·S + T·N(N+1)/2 (seed 001 §6:
S = system + tools + question, T = tokens one turn adds). Pi sends what its builder builds
under the stated budget. Both sides are counted with the same o200k_base counter.

A second workload (`case` `session`) is a conversation of 5 user turns under the default
budget (no window set by hand), each turn reading two pages and answering. It fits the
window, so only proactive compression (seed 002 §3.4) changes what is sent: per user turn,
`naive_input_tokens` is what the builder sends with it off (the whole history) and
`pi_input_tokens` with it on (earlier answered turns' results as digests).
"""

from __future__ import annotations

import tempfile
from typing import Any

from ..context import Budget, count_tokens
from ..context.builder import MESSAGE_OVERHEAD, message_text
from ..loop import Agent, Limits
from ..messages import message_from_dict
from ..observe import ModelRequested, read_trace
from ..testing import ScriptedModel
from ..tools import tool

TURNS = 30
SESSION_TURNS = 5
BUDGET = Budget(context_window=8_192, output_reserve=1_024, max_result_tokens=300, keep_recent=2)
_WORDS = [
    "revenue",
    "margin",
    "inventory",
    "supplier",
    "invoice",
    "freight",
    "warehouse",
    "forecast",
    "region",
    "quarter",
]


@tool(max_result_bytes=64_000)
def read_page(n: int) -> str:
    """Read page n of the quarterly report."""
    lines = [
        f"page {n} line {i}: "
        + " ".join(_WORDS[(n * 7 + i * 3 + k) % len(_WORDS)] for k in range(12))
        + f" value={(n * 131 + i * 17) % 997}"
        for i in range(60)
    ]
    return "\n".join(lines)


def _script(turns: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_page", "arguments": {"n": n}}]} for n in range(1, turns)
    ]
    steps.append({"text": "The report's pages are read; totals are in the last page."})
    return steps


def measure(turns: int = TURNS, budget: Budget = BUDGET) -> dict[str, Any]:
    """Per-turn input tokens for both sides, and the totals."""
    with tempfile.TemporaryDirectory() as trace_dir:
        agent = Agent(
            ScriptedModel(_script(turns)),
            tools=[read_page],
            budget=budget,
            limits=Limits(max_steps=turns + 1),
            trace_dir=trace_dir,
        )
        result = agent.run_sync("Read the quarterly report page by page, then summarise it.")
        if result.stop_reason != "final_answer":
            raise RuntimeError(f"context workload ended {result.stop_reason}: {result.error}")
        events = read_trace(result.trace or "")
    started = events[0]
    messages = [message_from_dict(e["message"]) for e in events if e["kind"] == "message"]
    sizes = [count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in messages]
    requests = [e for e in events if e["kind"] == "model_request"]
    fixed = requests[0]["context"]["tokens"]
    prefix = fixed["system"] + fixed["tools"] + count_tokens(started["runtime"])
    rows = []
    for number, request in enumerate(requests, 1):
        naive = prefix + sum(sizes[: request["message_count"]])
        rows.append(
            {
                "case": "long-run",
                "turn": number,
                "naive_input_tokens": naive,
                "pi_input_tokens": request["input_tokens"],
                "pi_steps": "+".join(request["context"]["steps"]) or "-",
            }
        )
    naive_total = sum(r["naive_input_tokens"] for r in rows)
    pi_total = sum(r["pi_input_tokens"] for r in rows)
    s = rows[0]["naive_input_tokens"]
    t = (rows[-1]["naive_input_tokens"] - s) / max(1, len(rows) - 1)
    n = len(rows)
    session = measure_session()
    return {
        "bench": "context",
        "rows": rows + session.pop("rows"),
        "session": session,
        "budget": {
            "context_window": budget.context_window,
            "output_reserve": budget.output_reserve,
            "max_result_tokens": budget.max_result_tokens,
            "keep_recent": budget.keep_recent,
        },
        "naive_total": naive_total,
        "pi_total": pi_total,
        "pi_share": round(pi_total / naive_total, 4),
        "naive_formula_total": round(n * s + t * (n - 1) * n / 2),
        "target_share": 0.40,
    }


def _session_script(turns: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        pages = [{"name": "read_page", "arguments": {"n": 2 * turn + k}} for k in range(2)]
        steps += [{"tool_calls": pages}, {"text": f"Pages {2 * turn} and {2 * turn + 1} read."}]
    return steps


def _session_run(turns: int, budget: Budget) -> list[tuple[int, str]]:
    """Input tokens sent for each user turn of the session, and the builder's steps."""
    agent = Agent(
        ScriptedModel(_session_script(turns)), tools=[read_page], budget=budget, trace_dir=False
    )
    history: list[Any] = []
    out = []
    for turn in range(1, turns + 1):
        result = agent.run_sync(
            f"What do pages {2 * turn} and {2 * turn + 1} say?", history=history
        )
        if result.stop_reason != "final_answer":
            raise RuntimeError(f"session workload ended {result.stop_reason}: {result.error}")
        history = list(result.messages)
        requests = [e for e in result.events if isinstance(e, ModelRequested)]
        steps = sorted({s for e in requests for s in e.context["steps"]})
        out.append((sum(e.input_tokens for e in requests), "+".join(steps) or "-"))
    return out


def measure_session(turns: int = SESSION_TURNS) -> dict[str, Any]:
    """Tokens per user turn of a multi-turn session under the default budget, with and
    without proactive compression."""
    on = _session_run(turns, Budget())
    off = _session_run(turns, Budget(digest_consumed=False))
    rows: list[dict[str, Any]] = [
        {
            "case": "session",
            "turn": turn,
            "naive_input_tokens": without,
            "pi_input_tokens": with_,
            "pi_steps": steps,
        }
        for turn, ((with_, steps), (without, _)) in enumerate(zip(on, off, strict=True), 1)
    ]
    with_total = sum(tokens for tokens, _ in on)
    without_total = sum(tokens for tokens, _ in off)
    return {
        "rows": rows,
        "turns": turns,
        "context_window": Budget().window_for(None),
        "without_proactive_total": without_total,
        "with_proactive_total": with_total,
        "share": round(with_total / without_total, 4),
    }
