"""Proactive compression (seed 002 §3.4): at each new user turn, the tool results an earlier
answer consumed shrink to their digest; the current question's own results never do.

The stories run a conversation turn by turn — in memory (`history=`), through a
continuation after a background job, and through a durable session with a worker — and
read what the model was sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime import Agent, Allow, Deny, Guardrails, RunResult, ToolCall, ToolResultMessage, tool
from pi_runtime.context import Budget, ContextBuilder
from pi_runtime.context.consumed import consumed_results, digest_result
from pi_runtime.durable import Store
from pi_runtime.durable.recipe import Recipe
from pi_runtime.durable.sessions import open_session, run_turn
from pi_runtime.durable.worker import Worker
from pi_runtime.loop import run_blocking
from pi_runtime.messages import AssistantMessage, Message, TextBlock, UserMessage
from pi_runtime.models import ModelRequest, ToolDefinition
from pi_runtime.observe import ModelRequested, read_trace
from pi_runtime.testing import FunctionModel, ScriptedModel, text
from pi_runtime.tools import ToolSpec


def page_text(n: int) -> str:
    return "\n".join(
        f"page {n} line {i}: revenue {(n * 131 + i * 17) % 997} margin {(n * 7 + i) % 89}"
        for i in range(40)
    )


@tool(max_result_bytes=64_000)
def read_page(n: int) -> str:
    """Read page n of the report."""
    return page_text(n)


def ask_then_answer(turns: int) -> list[dict[str, Any]]:
    """Each user turn: read one page, then answer."""
    steps: list[dict[str, Any]] = []
    for n in range(1, turns + 1):
        steps.append({"tool_calls": [{"name": "read_page", "arguments": {"n": n}}]})
        steps.append({"text": f"Page {n} read."})
    return steps


def requested(result: RunResult) -> list[ModelRequested]:
    return [e for e in result.events if isinstance(e, ModelRequested)]


def results_sent(request: ModelRequest) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in request.messages if isinstance(m, ToolResultMessage)}


def converse(agent: Agent, prompts: Sequence[str]) -> list[RunResult]:
    """The prompts as one conversation, each turn given the history so far."""
    out: list[RunResult] = []
    history: list[Message] = []
    for prompt in prompts:
        out.append(agent.run_sync(prompt, history=history, session_id="s"))
        history = list(out[-1].messages)
    return out


# --- the rule, on the builder ---------------------------------------------------------------

FETCH = ToolDefinition(name="read_page", description="Read a page.", parameters={"type": "object"})


def call(n: int) -> AssistantMessage:
    raw = json.dumps({"n": n})
    return AssistantMessage(
        content=(ToolCall(id=f"c{n}", name="read_page", raw=raw, arguments={"n": n}),),
        finish_reason="tool_calls",
    )


def result(n: int) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=f"c{n}", name="read_page", content=page_text(n))


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextBlock(text=text),))


def build(messages: Sequence[Message], anchor: int, budget: Budget | None = None) -> Any:
    builder = ContextBuilder(budget)
    return asyncio.run(
        builder.build(system="sys", tools=(FETCH,), messages=messages, anchor=anchor)
    )


def test_results_an_answer_consumed_become_digests_at_the_next_user_turn() -> None:
    messages: list[Message] = [
        UserMessage(content="page 1?"), call(1), result(1), answer("Page 1 says 42."),
        UserMessage(content="page 2?"), call(2), result(2),
    ]  # fmt: skip
    built = build(messages, anchor=4)
    assert built.digested == (2,) and built.steps == ("digest_consumed",)
    digest = built.messages[2]
    assert isinstance(digest, ToolResultMessage) and digest.tool_call_id == "c1"
    assert digest == digest_result(result(1))
    assert digest.content.startswith("page 1 line 0: revenue")
    assert "result:c1" in digest.content and f"{len(page_text(1).encode())} bytes" in digest.content
    # the current question's own result, the answer and the calls are sent as they are
    assert built.messages[6] == result(2)
    assert built.messages[1] == call(1) and built.messages[3] == answer("Page 1 says 42.")
    report = built.report()
    assert report["digested"] == [2] and report["steps"] == ["digest_consumed"]
    assert built.total_tokens < build(messages, 4, Budget(digest_consumed=False)).total_tokens


def test_no_digest_before_a_new_user_turn_or_without_an_answer() -> None:
    first = [UserMessage(content="page 1?"), call(1), result(1), answer("done")]
    # still the first request (the answer was just given): nothing is digested
    assert build(first, anchor=0).digested == ()
    # a request a guard stopped (no answer) keeps its results for the next question
    stopped: list[Message] = [
        UserMessage(content="page 1?"), call(1), result(1),
        UserMessage(content="go on"), call(2), result(2), answer("done"),
        UserMessage(content="page 3?"),
    ]  # fmt: skip
    assert consumed_results(stopped, 7) == [5]
    assert build(stopped, anchor=7).digested == (5,)
    # a contract repair turn is not a new request, and the answer after it may be one the
    # contract refused again (the run ending `contract_violation`): the conversation
    # cannot tell, so a repaired request keeps its results
    repaired: list[Message] = [
        UserMessage(content="page 1?"), call(1), result(1), answer("not json"),
        UserMessage(content="fix it", origin="contract_repair"), answer("{}"),
        UserMessage(content="page 2?"),
    ]  # fmt: skip
    assert consumed_results(repaired, 6) == []
    assert consumed_results([*repaired, call(2), result(2), answer("{}"), UserMessage(content="3?")], 10) == [8]  # fmt: skip
    assert build(stopped, anchor=7, budget=Budget(digest_consumed=False)).digested == ()


class Answer(BaseModel):
    answer: str


def test_results_of_a_request_the_contract_refused_are_sent_whole_next_time() -> None:
    # The first request ends `contract_violation`: its answer was refused three times.
    # The next question asks again; the model needs the page it read, not a digest of it.
    model = ScriptedModel([
        {"tool_calls": [{"name": "read_page", "arguments": {"n": 1}}]},
        text("not json"), text("still not json"), text("nope"),
        text('{"answer": "42"}'),
    ])  # fmt: skip
    agent = Agent(model, tools=[read_page], output=Answer, trace_dir=False)
    refused = agent.run_sync("What does page 1 say?")
    assert refused.stop_reason == "contract_violation"

    again = agent.run_sync("Try again, please.", history=refused.messages)

    assert again.stop_reason == "final_answer"
    read_id = next(m.tool_call_id for m in refused.messages if isinstance(m, ToolResultMessage))
    assert results_sent(model.requests[-1])[read_id] == page_text(1)
    assert requested(again)[0].context["digested"] == []


def test_results_of_a_request_whose_answer_was_withheld_are_sent_whole_next_time() -> None:
    # The output guardrail withholds the first answer (the run ends `security`); the next
    # question asks again, and the model needs the page it read, not a digest of it.
    def no_secrets(answer: str) -> Allow | Deny:
        return Deny("the answer names the secret") if "secret" in answer else Allow()

    model = ScriptedModel([
        {"tool_calls": [{"name": "read_page", "arguments": {"n": 1}}]},
        text("The secret is on page 1."), text("Page 1 gives revenue figures."),
    ])  # fmt: skip
    agent = Agent(
        model, tools=[read_page], guardrails=Guardrails(output=[no_secrets]), trace_dir=False
    )
    withheld = agent.run_sync("What does page 1 say?")
    assert withheld.stop_reason == "security"

    again = agent.run_sync("Try again, please.", history=withheld.messages)

    assert again.stop_reason == "final_answer"
    read_id = next(m.tool_call_id for m in withheld.messages if isinstance(m, ToolResultMessage))
    assert results_sent(model.requests[-1])[read_id] == page_text(1)
    assert requested(again)[0].context["digested"] == []


def test_results_of_a_request_the_contract_accepted_become_digests() -> None:
    model = ScriptedModel([
        {"tool_calls": [{"name": "read_page", "arguments": {"n": 1}}]},
        text('{"answer": "42"}'), text('{"answer": "43"}'),
    ])  # fmt: skip
    agent = Agent(model, tools=[read_page], output=Answer, trace_dir=False)
    first = agent.run_sync("What does page 1 say?")

    agent.run_sync("And what else?", history=first.messages)

    read_id = next(m.tool_call_id for m in first.messages if isinstance(m, ToolResultMessage))
    assert f"result:{read_id}" in results_sent(model.requests[-1])[read_id]


def test_a_small_result_stays_whole_when_its_digest_would_cost_more() -> None:
    small = ToolResultMessage(tool_call_id="c1", name="read_page", content="42")
    messages = [UserMessage(content="q"), call(1), small, answer("42"), UserMessage(content="q2")]
    assert build(messages, anchor=4).digested == ()


# --- in memory: Agent.run with history ------------------------------------------------------


def test_in_memory_history_sends_earlier_results_as_digests_only_after_their_answer() -> None:
    model = ScriptedModel(ask_then_answer(3))
    agent = Agent(model, tools=[read_page], trace_dir=False)
    runs = converse(agent, ["page 1?", "page 2?", "page 3?"])
    assert [r.output for r in runs] == ["Page 1 read.", "Page 2 read.", "Page 3 read."]
    ids = [m.tool_call_id for m in runs[-1].messages if isinstance(m, ToolResultMessage)]
    full = {m.tool_call_id: m.content for r in runs for m in r.messages if isinstance(m, ToolResultMessage)}  # fmt: skip
    for step, request in enumerate(model.requests):
        turn = step // 2  # two model calls per user turn
        sent = results_sent(request)
        for done in ids[:turn]:  # earlier requests, each answered: digests
            assert sent[done] != full[done] and f"result:{done}" in sent[done]
        for current in ids[turn : turn + 1]:  # the current question's result, when in
            if current in sent:
                assert sent[current] == full[current]
    # the record keeps every result whole: only what is sent shrinks
    assert all(full[i] == page_text(n) for n, i in enumerate(ids, 1))
    # the system + tools prefix is the same on every request
    first = model.requests[0]
    assert all((r.system, r.tools) == (first.system, first.tools) for r in model.requests)
    # and the digested history is the same bytes on every later request (cache-stable)
    assert model.requests[2].messages[:4] == model.requests[3].messages[:4]
    assert model.requests[4].messages[:4] == model.requests[2].messages[:4]
    events = requested(runs[2])
    assert all("digest_consumed" in e.context["steps"] for e in events)
    assert requested(runs[0])[0].context["digested"] == []


def test_without_proactive_compression_earlier_results_are_sent_whole() -> None:
    def tokens(budget: Budget) -> list[int]:
        agent = Agent(ScriptedModel(ask_then_answer(3)), tools=[read_page], budget=budget, trace_dir=False)  # fmt: skip
        return [e.input_tokens for r in converse(agent, ["1?", "2?", "3?"]) for e in requested(r)]

    on, off = tokens(Budget()), tokens(Budget(digest_consumed=False))
    assert on[:2] == off[:2]  # the first request has nothing to digest
    assert all(a < b for a, b in zip(on[2:], off[2:], strict=True))


# --- a continuation after a background job --------------------------------------------------


@tool(background=True)
def crunch(n: int) -> str:
    """Crunch page n (slow: runs as a background job)."""
    return page_text(100 + n)


class Jobs:
    async def __call__(
        self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any], key: str | None
    ) -> str:
        return f"job-{call.id}"


def test_a_continuation_keeps_earlier_digests_and_its_own_results_whole() -> None:
    script = [
        {"tool_calls": [{"name": "read_page", "arguments": {"n": 1}}]},
        {"text": "Page 1 read."},
        {"tool_calls": [{"name": "crunch", "arguments": {"n": 2}}]},
        {"text": "Crunched."},
    ]
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> dict[str, Any]:
        seen.append(request)
        return script[request.step]

    agent = Agent(FunctionModel(reply), tools=[read_page, crunch], trace_dir=False)
    first = agent.run_sync("page 1?", session_id="s")
    waiting = agent.run_sync("crunch 2", history=first.messages, session_id="s", launcher=Jobs())
    assert waiting.status == "awaiting"
    ((call_id, _),) = waiting.waits
    delivered = ToolResultMessage(tool_call_id=call_id, name="crunch", content=page_text(102))
    history = [*waiting.messages, delivered]
    done = agent.run_sync(None, history=history, session_id="s", launcher=Jobs())
    assert done.output == "Crunched."
    last = seen[-1]
    read_id = next(m.tool_call_id for m in first.messages if isinstance(m, ToolResultMessage))
    sent = results_sent(last)
    assert f"result:{read_id}" in sent[read_id]  # the answered request's result: a digest
    assert sent[call_id] == page_text(102)  # the delivered result of this request: whole
    (event,) = requested(done)
    assert event.context["digested"] == [2]


# --- a durable session: the worker's continuation digests too ------------------------------

TOOLS_MODULE = '''\
from pi_runtime import tool


def page_text(n):
    return "\\n".join(
        f"page {n} line {i}: revenue {(n * 131 + i * 17) % 997} margin {(n * 7 + i) % 89}"
        for i in range(40)
    )


@tool(max_result_bytes=64_000)
def read_page(n: int) -> str:
    """Read page n of the report."""
    return page_text(n)


@tool(background=True)
def crunch(n: int) -> str:
    """Crunch page n (slow: a background job)."""
    return page_text(100 + n)


TOOLS = [read_page, crunch]
'''


def test_a_durable_sessions_continuation_digests_the_answered_turn(
    store: Store, tmp_path: Path
) -> None:
    module = f"proactive_tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(TOOLS_MODULE, encoding="utf-8")
    script = {
        "steps": [
            {"tool_calls": [{"name": "read_page", "arguments": {"n": 1}}]},
            {"text": "Page 1 read."},
            {"tool_calls": [{"name": "crunch", "arguments": {"n": 2}}]},
            {"text": "Crunched."},
        ]
    }
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    wanted = Recipe(
        model=f"scripted:{tmp_path / 'script.json'}",
        tools=(f"{module}:TOOLS",),
        import_path=str(tmp_path),
    )
    _, recipe = open_session(store, "talk", wanted)
    traces = tmp_path / "traces"
    for prompt in ("page 1?", "crunch 2"):
        agent = recipe.build_agent(trace_dir=traces)
        turn = run_blocking(run_turn(store, "talk", prompt, agent=agent, owner="cli"))
    assert turn.result.status == "awaiting"
    asyncio.run(Worker(store, poll_s=0.01, trace_dir=traces).run(once=True))
    messages = [m.message for m in store.load_messages("talk")]
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].text == "Crunched."
    requests = [
        e for path in sorted(traces.glob("*.jsonl")) for e in read_trace(str(path))
        if e["kind"] == "model_request"
    ]  # fmt: skip
    by_step = {e["turn"]: e["context"] for e in requests}
    assert by_step[0]["digested"] == by_step[1]["digested"] == []
    # the second request and its continuation (the worker's) both digest turn 1's result
    read_index = next(i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage))
    delivered = max(i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage))
    assert by_step[2]["digested"] == by_step[3]["digested"] == [read_index]
    assert delivered not in by_step[3]["digested"]
    # the store keeps the full results
    assert isinstance(messages[read_index], ToolResultMessage)
    assert "line 39" in messages[read_index].content
