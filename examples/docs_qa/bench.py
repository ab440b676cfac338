"""`pi bench docs`: context tokens per question, ids-not-text against pasting documents.

Both designs answer the suite's questions (make_suite.py) as scripted tool-call sequences
run by the real agent loop, with the same final answer:

- `pi`: search_docs(query) → analyze_text(doc_id, question) → answer: ids and snippets;
- `naive` (seed 003 §1): search returns the whole document, and the model pastes it into
  analyze_text(text=…, question) → answer — the document travels in a result *and* in
  arguments.

The same three model calls on each side, and the same passages found: only what moves
through the context differs.

A question's context tokens are what its model calls are sent, summed: system prompt,
tool schemas and runtime block, plus every message so far (no trimming on either side,
so only the design differs). Counted with Pi's o200k_base counter.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from typing import Any

from pi_runtime import Agent, Limits, tool
from pi_runtime.context import Budget, count_tokens
from pi_runtime.context.builder import MESSAGE_OVERHEAD, message_text
from pi_runtime.messages import message_from_dict
from pi_runtime.observe import read_trace
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import ToolSpec

from . import tools as docs
from .make_suite import Case, cases

__all__ = ["measure"]

_BIG = 8_000_000  # the naive tools take and return whole documents
_NAIVE_BUDGET = Budget(context_window=4_000_000, output_reserve=1_024, max_result_tokens=4_000_000)


@tool(max_arg_bytes=_BIG, max_result_bytes=_BIG)
def search_docs_naive(query: str) -> str:
    """Search the documentation; returns the best document's full text."""
    corpus, index = docs.library()
    hits = index.search(query, 1)
    return corpus.docs[hits[0].doc_id].text if hits else ""


@tool(max_arg_bytes=_BIG, max_result_bytes=_BIG)
def analyze_text_naive(text: str, question: str) -> str:
    """Find the passages of a document's text that answer a question."""
    corpus, _ = docs.library()
    doc = next((d for d in corpus.docs.values() if d.text == text), None)
    if doc is None:
        return "no passages"
    return docs.analyze_text.function(doc_id=doc.id, question=question)  # type: ignore[no-any-return]


def _answer(case: Case) -> str:
    return f"From the {case.doc_id} documentation of {case.section}: see the signature above."


def _pi_script(case: Case) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "search_docs", "arguments": {"query": f"{case.doc_id} {case.section}", "limit": 5}}]},
        {"tool_calls": [{"name": "analyze_text", "arguments": {"doc_id": case.doc_id, "question": case.prompt}}]},
        {"text": _answer(case)},
    ]  # fmt: skip


def _naive_script(case: Case) -> list[dict[str, Any]]:
    corpus, _ = docs.library()
    text = corpus.docs[case.doc_id].text
    return [
        {"tool_calls": [{"name": "search_docs_naive", "arguments": {"query": f"{case.doc_id} {case.section}"}}]},
        {"tool_calls": [{"name": "analyze_text_naive", "arguments": {"text": text, "question": case.prompt}}]},
        {"text": _answer(case)},
    ]  # fmt: skip


def _run(
    case: Case, script: list[dict[str, Any]], tools: list[ToolSpec], budget: Budget
) -> dict[str, int]:
    """Run one scripted question; its context tokens summed over model calls, and the peak."""
    with tempfile.TemporaryDirectory() as trace_dir:
        agent = Agent(
            ScriptedModel(script),
            tools=tools,
            budget=budget,
            limits=Limits(max_steps=len(script) + 1, token_budget=None),
            trace_dir=trace_dir,
        )
        result = agent.run_sync(case.prompt)
        if result.stop_reason != "final_answer":
            raise RuntimeError(
                f"{case.name}: the scripted run ended {result.stop_reason}: {result.error}"
            )
        events = read_trace(result.trace or "")
    errors = [e for e in events if e["kind"] == "message" and e["message"].get("is_error")]
    if errors:
        raise RuntimeError(f"{case.name}: a tool failed: {errors[0]['message']['content']}")
    messages = [message_from_dict(e["message"]) for e in events if e["kind"] == "message"]
    sizes = [count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in messages]
    requests = [e for e in events if e["kind"] == "model_request"]
    fixed = requests[0]["context"]["tokens"]
    prefix = fixed["system"] + fixed["tools"] + count_tokens(events[0]["runtime"])
    sent = [prefix + sum(sizes[: r["message_count"]]) for r in requests]
    return {"tokens": sum(sent), "peak": max(sent), "calls": len(sent)}


def measure(
    limit: int | None = None, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """One row per question (the first `limit`), and the totals."""
    corpus, _ = docs.library()
    rows: list[dict[str, Any]] = []
    refused = 0
    for case in cases(corpus)[:limit]:
        if progress is not None:
            progress(case.name)
        pi = _run(case, _pi_script(case), docs.TOOLS, Budget())
        naive_script = _naive_script(case)
        naive = _run(case, naive_script, [search_docs_naive, analyze_text_naive], _NAIVE_BUDGET)
        pasted = json.dumps(naive_script[1]["tool_calls"][0]["arguments"], ensure_ascii=False)
        refused += len(pasted.encode()) > docs.MAX_ARG_BYTES  # Pi's gate would refuse it
        rows.append(
            {
                "case": case.name,
                "doc_id": case.doc_id,
                "doc_bytes": len(corpus.docs[case.doc_id].text.encode()),
                "pi_tokens": pi["tokens"],
                "naive_tokens": naive["tokens"],
                "ratio": round(naive["tokens"] / pi["tokens"], 2),
                "pi_peak": pi["peak"],
                "naive_peak": naive["peak"],
            }
        )
    pi_total = sum(r["pi_tokens"] for r in rows)
    naive_total = sum(r["naive_tokens"] for r in rows)
    return {
        "bench": "docs",
        "python": corpus.python,
        "corpus_bytes": corpus.size_bytes,
        "corpus_docs": len(corpus.docs),
        "rows": rows,
        "questions": len(rows),
        "pi_tokens_per_question": round(pi_total / max(1, len(rows))),
        "naive_tokens_per_question": round(naive_total / max(1, len(rows))),
        "ratio": round(naive_total / max(1, pi_total), 2),
        "naive_calls_refused_by_gate": refused,
    }
