"""`pi bench preamble`: the ERP import of seed 000 — a model that restates a whole table
before calling the tool — with output discipline and one-shot tool choice off and on.

Two kinds of model, side by side:

- `scripted`: a behavioural model of what the seed measured. With no rules it restates the
  table and a plan before the call (and the restatement plus the arguments can overrun
  `max_tokens`, voiding the call); with the discipline rules in its system prompt it says
  one sentence; under a forced tool choice it emits the call alone. It "generates" at a
  fixed simulated speed, so time to first tool call follows the text it wrote.
- `local`: the embedded model, for real, when it is installed.

The four metrics of seed 000 come from the runs themselves, exactly as any run reports them.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from ..context import OUTPUT_DISCIPLINE, PromptParts, count_tokens
from ..exceptions import UserError
from ..loop import Agent, Limits
from ..messages import TextBlock, ToolCall, Usage
from ..models import Model, ModelRequest, ModelResponse, ModelSettings, resolve_model
from ..testing import FunctionModel
from ..tools import tool

ROWS = 120
MAX_TOKENS = 4_096
SIMULATED_TOKENS_PER_S = 2_000.0  # fast enough to keep the bench short; the seed saw ~140
METRICS = (
    "text_tokens_before_first_tool_call",
    "time_to_first_tool_call_ms",
    "mixed_text_tool_message_rate",
    "tool_argument_truncation_count",
)


def recipe_rows(count: int = ROWS) -> list[dict[str, Any]]:
    """The recognised table of the import: one dict per recipe element."""
    elements = ["Fe", "Cu", "Zn", "Mn", "Ni", "Cr", "Mo", "Si", "Al", "Ti"]
    return [
        {
            "line": i + 1,
            "element": elements[i % len(elements)],
            "min_pct": round(0.05 * (i % 9), 2),
            "max_pct": round(0.05 * (i % 9) + 0.4, 2),
            "batch": f"B{2026_000 + i}",
        }
        for i in range(count)
    ]


@tool(idempotent=False, max_arg_bytes=200_000)
def import_draft(rows: list[dict[str, Any]], idempotency_key: str) -> dict[str, Any]:
    """Create the import draft from the recognised rows of the attached table."""
    return {"draft_id": idempotency_key[-10:], "rows": len(rows)}


PROMPT = "Import the attached recipe table into a draft.\n\nattachment recipe.xlsx:\n" + "\n".join(
    " | ".join(str(v) for v in row.values()) for row in recipe_rows()
)


def _restatement(rows: list[dict[str, Any]]) -> str:
    table = "\n".join(
        f"| {r['line']} | {r['element']} | {r['min_pct']} | {r['max_pct']} | {r['batch']} |"
        for r in rows
    )
    return (
        "Let me first organise what the attachment contains. The recognised table:\n"
        "| line | element | min % | max % | batch |\n|---|---|---|---|---|\n"
        f"{table}\n\nPlan: 1) validate every element, 2) create the draft, 3) summarise."
    )


def behavioural_model() -> Model:
    """The scripted side: reacts to the discipline rules and to a forced tool choice."""
    rows = recipe_rows()
    arguments = json.dumps({"rows": rows}, separators=(",", ":"))

    async def respond(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" and not m.is_error for m in request.messages):
            return ModelResponse(content=(TextBlock(text=f"Draft created with {len(rows)} rows."),))
        retry = any(m.role == "tool" for m in request.messages)
        if request.tool_choice != "auto" or retry:
            text = ""
        elif OUTPUT_DISCIPLINE.splitlines()[1] in request.system:
            text = "Importing the table into a draft."
        else:
            text = _restatement(rows)
        text_tokens = count_tokens(text) if text else 0
        arg_tokens = count_tokens(arguments)
        cut = text_tokens + arg_tokens > MAX_TOKENS
        spent = min(MAX_TOKENS, text_tokens + arg_tokens)
        await asyncio.sleep(text_tokens / SIMULATED_TOKENS_PER_S)  # the text comes first
        raw = arguments[: max(0, (MAX_TOKENS - text_tokens) * 3)] if cut else arguments
        call = ToolCall(id=f"imp_{request.step}", name="import_draft", raw=raw, truncated=cut)
        blocks = (TextBlock(text=text, phase="commentary"), call) if text else (call,)
        return ModelResponse(
            content=blocks,
            finish_reason="length" if cut else "tool_calls",
            usage=Usage(input_tokens=0, output_tokens=spent),
        )

    return FunctionModel(respond, name="scripted-erp")


def run_case(model: Model, *, discipline: bool, tool_choice: bool) -> dict[str, Any]:
    """One run of the import; its metrics as the run reported them."""
    with tempfile.TemporaryDirectory() as trace_dir:
        agent = Agent(
            model,
            tools=[import_draft],
            instructions=PromptParts(discipline=discipline),
            settings=ModelSettings(max_tokens=MAX_TOKENS),
            limits=Limits(max_steps=4, wall_clock_s=300),
            trace_dir=trace_dir,
        )
        result = agent.run_sync(PROMPT, next_tool_choice="import_draft" if tool_choice else "auto")
    metrics = result.metrics
    return {
        **{name: metrics[name] for name in METRICS},
        "output_tokens": result.usage.output_tokens,
        "steps": result.steps,
        "stop_reason": result.stop_reason,
    }


def measure(*, with_local: bool = True) -> dict[str, Any]:
    """Rows for every model × discipline × tool choice."""
    models: list[tuple[str, Model]] = [("scripted", behavioural_model())]
    unavailable: dict[str, str] = {}
    if with_local:
        try:
            models.append(("local", resolve_model("local")))
        except UserError as exc:
            unavailable["local"] = str(exc)
    count_tokens("warm up")  # load the tokenizer before any clock runs
    rows = []
    for name, model in models:
        for discipline in (False, True):
            for forced in (False, True):
                row = run_case(model, discipline=discipline, tool_choice=forced)
                rows.append({"model": name, "discipline": discipline, "tool_choice": forced, **row})
    return {
        "bench": "preamble",
        "rows": rows,
        "unavailable": unavailable,
        "table_rows": ROWS,
        "max_tokens": MAX_TOKENS,
    }
