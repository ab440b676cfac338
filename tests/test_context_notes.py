"""The note that stands for dropped turns: counted once per line, fitted to the room, and
never the end of a run, whatever the summariser does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from pi_runtime import Agent, Limits, tool
from pi_runtime.context import (
    Budget,
    BuiltContext,
    ContextBuilder,
    Summariser,
    count_tokens,
    message_text,
    model_summariser,
)
from pi_runtime.context.builder import MESSAGE_OVERHEAD
from pi_runtime.exceptions import ModelError
from pi_runtime.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_runtime.models import ModelRequest, ModelResponse, ToolDefinition
from pi_runtime.observe import ModelRequested
from pi_runtime.testing import FunctionModel, ScriptedModel

LOOKUP = ToolDefinition(name="lookup", description="Look a city up.", parameters={"type": "object"})
HEAD = "[Earlier in this conversation: {units} exchange(s) left out to fit the context.]"


def build(builder: ContextBuilder, messages: Sequence[Message], system: str = "S") -> BuiltContext:
    return asyncio.run(builder.build(system=system, tools=(LOOKUP,), messages=messages, anchor=0))


def size(messages: Sequence[Message]) -> int:
    return sum(count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in messages)


def arguments(key: str, j: int) -> str:
    return json.dumps({"city": f"{key} {j} " + "y" * 200})


def unit(calls: int, key: str, *, result: str) -> list[Message]:
    """An assistant message making `calls` lookups, then their results."""
    made = [ToolCall(id=f"{key}_{j}", name="lookup", raw=arguments(key, j)) for j in range(calls)]
    results: list[Message] = [
        ToolResultMessage(tool_call_id=c.id, name="lookup", content=result) for c in made
    ]
    return [AssistantMessage(content=tuple(made), finish_reason="tool_calls"), *results]


class TokenizerBudget:
    """Stands for the o200k encoder, adds up the characters it tokenizes, and stops the
    build once they pass `limit`: a build that recounts its digest line by line (minutes
    of CPU at these sizes) fails in a fraction of a second instead."""

    def __init__(self, real: Any, limit: int) -> None:
        self.real = real
        self.limit = limit
        self.chars = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.chars += len(text)
        assert self.chars <= self.limit, f"tokenized {self.chars} characters, over {self.limit}"
        return list(self.real.encode_ordinary(text))


@pytest.fixture
def tokenizer(monkeypatch: pytest.MonkeyPatch) -> TokenizerBudget:
    from pi_runtime.context import tokens

    spy = TokenizerBudget(tokens.encoding(), limit=0)
    monkeypatch.setattr(tokens, "encoding", lambda: spy)
    return spy


def chars_of(messages: Sequence[Message]) -> int:
    return sum(len(message_text(m)) for m in messages)


def linear(messages: Sequence[Message], lines: int) -> int:
    """What a build may tokenize: each message once, each digest line (300 characters at
    most) twice, and a few texts of up to twice the note's 1,000 tokens while fitting it."""
    return chars_of(messages) + 2 * 300 * lines + 10 * 4 * 1_000


# --- counting the note: each digest line once -------------------------------------------


def test_a_reply_of_a_thousand_parallel_calls_is_digested_without_recounting_the_digest(
    tokenizer: TokenizerBudget,
) -> None:
    # One reply holds 1,000 calls; once it leaves the recent units, its 1,000-line digest
    # is trimmed to `digest_tokens` on every later request. Dropping the oldest line and
    # counting the rest again, line by line, took 8 s a request.
    messages = [UserMessage(content="go"), *unit(1_000, "c", result="ok " + "y" * 200)]
    messages += unit(1, "n0", result="ok") + unit(1, "n1", result="ok")
    builder = ContextBuilder(Budget(context_window=32_000))
    tokenizer.limit = linear(messages, lines=1_000)

    built = build(builder, messages)

    assert built.steps == ("window",) and built.dropped == ((1, 1002),)
    note = built.summary
    assert note is not None and built.messages[1] == UserMessage(content=note)
    # the digest lines of the newest calls that fit in digest_tokens, and not one more
    head, *kept = note.split("\n")
    first = 1_000 - len(kept)

    def line(j: int) -> str:  # name, arguments, head of the result
        return f"- lookup({arguments('c', j)[:160]}) → {('ok ' + 'y' * 200)[:120]}"

    assert head == HEAD.format(units=1) and 0 < len(kept) < 1_000
    assert kept == [line(j) for j in range(first, 1_000)]
    assert count_tokens(note) <= 1_000 < count_tokens("\n".join([head, line(first - 1), *kept]))
    assert built.layers["context"] == size(built.messages[1:])  # the count is exact

    # the next request: the same reply is dropped; only the new messages are tokenized,
    # and a few texts the size of the note while it is fitted again
    more = messages + unit(1, "n2", result="ok")
    tokenizer.chars, tokenizer.limit = 0, chars_of(more[-2:]) + 8 * len(note)
    again = build(builder, more)
    assert again.dropped == ((1, 1004),)
    newest = f"- lookup({arguments('n0', 0)[:160]}) → ok"  # the first small exchange
    assert again.summary is not None and again.summary.endswith(newest)
    assert again.layers["context"] == size(again.messages[1:])


def test_hundreds_of_dropped_exchanges_count_each_digest_line_once(
    tokenizer: TokenizerBudget,
) -> None:
    # 600 small exchanges, each about the size of its digest line: the window drops all
    # but the protected two, pricing the note anew after each one it drops (21 s before)
    messages: list[Message] = [UserMessage(content="go")]
    for i in range(600):
        messages += unit(1, f"u{i}", result="ok " + "z" * 100)
    tokenizer.limit = linear(messages, lines=600)

    built = build(ContextBuilder(Budget(context_window=32_000)), messages)

    assert built.dropped == ((1, 1197),)
    assert built.messages[-4:] == tuple(messages[-4:])
    assert built.layers["context"] == size(built.messages[1:])
    assert not built.over_budget


# --- the summary: fitted to the room, or the trimmed digest -----------------------------


def pages(units: int, rows: int) -> list[Message]:
    messages: list[Message] = [UserMessage(content="Summarise the report page by page.")]
    for p in range(units):
        call = ToolCall(id=f"call_{p}", name="lookup", raw=json.dumps({"page": p}))
        text = "\n".join(f"page {p} row {i}: value {i * 7919 % 1000}" for i in range(rows))
        messages += [
            AssistantMessage(content=(call,), finish_reason="tool_calls"),
            ToolResultMessage(tool_call_id=call.id, name="lookup", content=text),
        ]
    return messages


TIGHT = Budget(context_window=3_000, output_reserve=500, digest_tokens=1_000, max_result_tokens=200)


class Calls:
    """A summariser of the test's making that counts its calls."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls = 0

    async def __call__(self, text: str) -> str:
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("summariser", "why"),
    [
        (model_summariser(ScriptedModel([{"text": ""}])), "the summary was empty"),
        (Calls("   \n"), "the summary was empty"),
        (Calls("x " * 3_000), "tokens, more than the"),
        (Calls(ModelError("upstream 503", transient=True)), "failed: ModelError: upstream 503"),
        (Calls(RuntimeError("boom")), "the summariser failed: RuntimeError: boom"),
        (Calls(None), "the summariser returned NoneType, not text"),  # a user's bug
    ],
    ids=["model-empty", "blank", "too-long", "model-error", "raises", "not-text"],
)
def test_a_summary_that_is_empty_fails_or_does_not_fit_gives_way_to_the_trimmed_digest(
    summariser: Summariser, why: str
) -> None:
    messages = pages(40, 30)
    trimmed = build(ContextBuilder(TIGHT), messages)  # no summariser: the oldest lines go
    builder = ContextBuilder(TIGHT, summariser=summariser)

    built = build(builder, messages)

    assert built.messages == trimmed.messages and built.summary == trimmed.summary
    assert built.steps == ("truncate_results", "window")  # no "summary": none was sent
    assert built.summary_fallback is not None and why in built.summary_fallback
    report = built.report()
    assert report["summary_fallback"] == built.summary_fallback
    assert "summariser" not in report
    assert not built.over_budget and built.total_tokens <= 2_500
    assert built.total_tokens == trimmed.total_tokens
    # asked once for this dropped prefix, not again on every later request
    build(builder, messages)
    if isinstance(summariser, Calls):
        assert summariser.calls == 1


def test_a_summary_that_fits_the_room_is_sent_and_its_usage_reported() -> None:
    messages = pages(40, 30)
    model = ScriptedModel([{"text": "pages 0-33: values", "usage": {"input_tokens": 2_400, "output_tokens": 9}}])  # fmt: skip
    builder = ContextBuilder(TIGHT, summariser=model_summariser(model))

    built = build(builder, messages)
    again = build(builder, messages)

    assert built.steps == ("truncate_results", "window", "summary")
    assert built.summary is not None and built.summary.endswith("\npages 0-33: values")
    assert built.summary_fallback is None and "summary_fallback" not in built.report()
    assert built.summary_usage == Usage(input_tokens=2_400, output_tokens=9)
    # the next request reuses the summary: no call, nothing spent
    assert again.summary == built.summary and again.summary_usage is None
    assert len(model.requests) == 1
    assert built.total_tokens <= 2_500


@tool
def fetch(page: int) -> str:
    """Fetch one page."""
    return "\n".join(f"page {page} row {i}: sku {i * 7919 % 100003:05d} qty {i % 17}" for i in range(120))  # fmt: skip


@pytest.mark.parametrize("summary", ["error", "empty"])
def test_a_run_whose_summary_call_fails_or_writes_nothing_goes_on_within_its_budget(
    summary: str,
) -> None:
    summary_calls: list[ModelRequest] = []
    steps = iter(range(100))

    def reply(request: ModelRequest) -> dict[str, Any]:
        if request.system.startswith("Summarise") and not request.tools:
            summary_calls.append(request)
            if summary == "error":
                raise ModelError("upstream 503", transient=True)
            return {"text": ""}
        n = next(steps)
        if n < 25:
            return {"tool_calls": [{"name": "fetch", "arguments": {"page": n + 1}}]}
        return {"text": "done"}

    budget = Budget(context_window=8_000, output_reserve=500, max_result_tokens=300, digest_tokens=100)  # fmt: skip
    agent = Agent(
        FunctionModel(reply), tools=[fetch], budget=budget, summariser="model",
        trace_dir=False, limits=Limits(max_steps=40),
    )  # fmt: skip

    result = agent.run_sync("Read pages 1 to 25.")

    assert (result.status, result.stop_reason) == ("completed", "final_answer"), result.error
    requests = [e for e in result.events if isinstance(e, ModelRequested)]
    fallbacks = [e.context["summary_fallback"] for e in requests if "summary_fallback" in e.context]
    assert summary_calls and len(fallbacks) >= len(summary_calls)
    assert all(not e.context["over_budget"] and e.input_tokens <= 7_500 for e in requests)
    assert not any("summary" in e.context["steps"] for e in requests)


def test_a_summary_calls_usage_is_billed_to_the_run_and_counts_against_its_budget() -> None:
    summary_calls: list[ModelRequest] = []
    steps = iter(range(100))

    def reply(request: ModelRequest) -> dict[str, Any]:
        if request.system.startswith("Summarise") and not request.tools:
            summary_calls.append(request)
            return {"text": "pages so far: rows of skus", "usage": {"input_tokens": 50_000, "output_tokens": 7}}  # fmt: skip
        n = next(steps)
        if n < 25:
            return {"tool_calls": [{"name": "fetch", "arguments": {"page": n + 1}}]}
        return {"text": "done"}

    budget = Budget(context_window=8_000, output_reserve=500, max_result_tokens=300, digest_tokens=100)  # fmt: skip

    def run(limits: Limits) -> Any:
        agent = Agent(FunctionModel(reply), tools=[fetch], budget=budget, summariser="model",
                      trace_dir=False, limits=limits)  # fmt: skip
        return agent.run_sync("Read pages 1 to 25.")

    result = run(Limits(max_steps=40))
    assert (result.status, result.stop_reason) == ("completed", "final_answer"), result.error
    assert len(summary_calls) >= 1
    billed = [
        e.context["summary_usage"]
        for e in result.events
        if isinstance(e, ModelRequested) and "summary_usage" in e.context
    ]
    assert billed == [{"input": 50_000, "output": 7}] * len(summary_calls)
    assert result.usage.input_tokens >= 50_000 * len(summary_calls)
    # the same run under a budget that only the summary calls take it past: stopped
    spent_elsewhere = result.usage.total_tokens - 50_007 * len(summary_calls)
    steps = iter(range(100))
    summary_calls.clear()
    stopped = run(Limits(max_steps=40, token_budget=spent_elsewhere + 1_000))
    assert (stopped.status, stopped.stop_reason) == ("stopped", "token_budget"), stopped.error
    assert summary_calls  # (unbilled, the same run completed within this budget)


@pytest.mark.parametrize("reported", [-50_000, "lots", 10**15], ids=["negative", "text", "huge"])
def test_a_summary_call_reporting_no_count_of_tokens_is_billed_by_pis_own_count(
    reported: object,
) -> None:
    steps = iter(range(100))

    def reply(request: ModelRequest) -> dict[str, Any]:
        if request.system.startswith("Summarise") and not request.tools:
            # built by hand: the script shape would refuse such figures before Pi saw them
            usage = Usage(input_tokens=reported, output_tokens=3)  # type: ignore[arg-type]
            text = (TextBlock(text="pages so far: rows"),)
            return ModelResponse(content=text, usage=usage)  # type: ignore[return-value]
        n = next(steps)
        if n < 25:
            return {"tool_calls": [{"name": "fetch", "arguments": {"page": n + 1}}]}
        return {"text": "done"}

    budget = Budget(context_window=8_000, output_reserve=500, max_result_tokens=300, digest_tokens=100)  # fmt: skip
    agent = Agent(FunctionModel(reply), tools=[fetch], budget=budget, summariser="model",
                  trace_dir=False, limits=Limits(max_steps=40))  # fmt: skip

    result = agent.run_sync("Read pages 1 to 25.")

    assert (result.status, result.stop_reason) == ("completed", "final_answer"), result.error
    billed = [e.context["summary_usage"] for e in result.events
              if isinstance(e, ModelRequested) and "summary_usage" in e.context]  # fmt: skip
    assert billed and all(0 < b["input"] < 10**12 and b["output"] == 3 for b in billed)
    assert 0 < result.usage.input_tokens < 10**12
