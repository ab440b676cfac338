"""The layered context builder: exact cached counts, a cache-stable prefix, compression in order."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import date
from typing import Any

import pytest

from pi_runtime import Agent, Limits, UserError, tool
from pi_runtime.context import (
    Budget,
    BuiltContext,
    ContextBuilder,
    count_tokens,
    load_template,
    message_text,
    model_summariser,
)
from pi_runtime.context.builder import MESSAGE_OVERHEAD
from pi_runtime.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_runtime.models import ModelRequest, ToolDefinition
from pi_runtime.observe import ModelRequested, ModelResponded, read_trace
from pi_runtime.testing import ScriptedModel

SYSTEM = "You are a test agent. Follow the rules.\n"
FETCH = ToolDefinition(
    name="fetch",
    description="Fetch one page of the report.",
    parameters={
        "type": "object",
        "properties": {"page": {"type": "integer"}, "part": {"type": "integer"}},
        "required": ["page", "part"],
        "additionalProperties": False,
    },
)
TASK = "Summarise the quarterly report page by page."
HUGE = 10**9


def rows(page: int, n: int) -> str:
    """Deterministic tabular text of about 20 tokens a row, different on every page."""
    return "\n".join(
        f"page {page} row {i}: sku-{(page * 1000 + i) * 7919 % 100003:05d} "
        f"qty {i % 17} price {(i * 37) % 1000}.{i % 100:02d}"
        for i in range(n)
    )


def exchange(page: int, *, n_rows: int, calls: int = 1) -> list[Message]:
    """One unit: an assistant message calling `fetch` `calls` times, then every result."""
    tool_calls = [
        ToolCall(
            id=f"call_{page}_{j}",
            name="fetch",
            raw=json.dumps({"page": page, "part": j}, separators=(",", ":")),
            arguments={"page": page, "part": j},
        )
        for j in range(calls)
    ]
    results: list[Message] = [
        ToolResultMessage(tool_call_id=c.id, name="fetch", content=rows(page * 10 + j, n_rows))
        for j, c in enumerate(tool_calls)
    ]
    return [AssistantMessage(content=tuple(tool_calls), finish_reason="tool_calls"), *results]


def conversation(units: int, *, n_rows: int, calls: int = 1) -> list[Message]:
    messages: list[Message] = [UserMessage(content=TASK)]
    for page in range(1, units + 1):
        messages += exchange(page, n_rows=n_rows, calls=calls)
    return messages


def build(
    builder: ContextBuilder, messages: Sequence[Message], *, anchor: int = 0, runtime: str = ""
) -> BuiltContext:
    return asyncio.run(
        builder.build(
            system=SYSTEM, tools=(FETCH,), messages=messages, anchor=anchor, runtime=runtime
        )
    )


def size(messages: Sequence[Message]) -> int:
    """What the builder charges for `messages`: exact o200k count plus the per-message overhead."""
    return sum(count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in messages)


def fixed_layers(messages: Sequence[Message]) -> int:
    """System + tools + user tokens of an uncompressed build (no runtime block)."""
    layers = build(ContextBuilder(Budget(context_window=HUGE)), messages).layers
    return layers["system"] + layers["tools"] + layers["user"]


def assert_calls_paired(messages: Sequence[Message]) -> None:
    """Every tool call has its result right after its assistant message, and vice versa."""
    open_ids: set[str] = set()
    for message in messages:
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in open_ids, f"result {message.tool_call_id} has no call"
            open_ids.remove(message.tool_call_id)
            continue
        assert not open_ids, f"calls {sorted(open_ids)} lost their results"
        if isinstance(message, AssistantMessage):
            open_ids = {c.id for c in message.tool_calls}
    assert not open_ids, f"calls {sorted(open_ids)} lost their results"


class CountingCounter:
    """count_tokens that records every text it was asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return count_tokens(text)


class FakeSummariser:
    """An async summariser that counts its calls and remembers what it was given."""

    def __init__(self) -> None:
        self.inputs: list[str] = []

    async def __call__(self, text: str) -> str:
        self.inputs.append(text)
        return f"SUMMARY#{len(self.inputs)} of the early pages"


# --- exact, cached token counts ---------------------------------------------------------


def test_next_turn_counts_only_the_new_messages() -> None:
    counter = CountingCounter()
    builder = ContextBuilder(counter=counter)
    turn1 = conversation(1, n_rows=5)
    build(builder, turn1)
    assert len(counter.texts) == len(turn1) + 2  # the messages, then system and tools once
    counter.texts.clear()
    turn2 = turn1 + exchange(2, n_rows=5)
    build(builder, turn2)
    assert counter.texts == [message_text(m) for m in turn2[len(turn1) :]]


def test_an_answer_counted_for_its_usage_is_not_tokenized_again_in_the_history() -> None:
    # A provider that reports no output tokens gets the answer counted; when the answer
    # joins the history the next turn, that count is reused, not recomputed.
    counter = CountingCounter()
    builder = ContextBuilder(counter=counter)
    turn1 = conversation(1, n_rows=5)
    build(builder, turn1)
    turn2 = turn1 + exchange(2, n_rows=5)
    answer = turn2[len(turn1)]
    counter.texts.clear()

    output_tokens = builder.count_answer(answer)
    counts = builder.count(turn2)

    assert output_tokens == count_tokens(message_text(answer))
    assert counts[len(turn1)] == output_tokens + MESSAGE_OVERHEAD
    # the answer once, then only the result that came after it
    assert counter.texts == [message_text(m) for m in turn2[len(turn1) :]]


def test_a_message_that_only_resembles_the_last_answer_is_counted_itself() -> None:
    counter = CountingCounter()
    builder = ContextBuilder(counter=counter)
    history = conversation(1, n_rows=5)
    builder.count_answer(AssistantMessage(content=(TextBlock(text="other words"),)))
    counter.texts.clear()

    counts = builder.count(history)

    assert counter.texts == [message_text(m) for m in history]
    assert counts == [count_tokens(message_text(m)) + MESSAGE_OVERHEAD for m in history]


def test_runtime_block_is_not_recounted_every_turn() -> None:
    # The agent passes the same runtime block on every turn of a run.
    runtime = "[runtime]\ndate: 2025-01-01\nmode: tools\ntools:\n- fetch: Fetch.\n[/runtime]"
    counter = CountingCounter()
    builder = ContextBuilder(counter=counter)
    turn1 = conversation(1, n_rows=5)
    build(builder, turn1, runtime=runtime)
    counter.texts.clear()
    turn2 = turn1 + exchange(2, n_rows=5)
    build(builder, turn2, runtime=runtime)
    assert counter.texts == [message_text(m) for m in turn2[len(turn1) :]]


class EncoderSpy:
    """Stands for the o200k encoder and records each text it tokenizes."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.texts: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.texts.append(text)
        return list(self.real.encode_ordinary(text))


def build_system(builder: ContextBuilder, system: str) -> BuiltContext:
    turn = conversation(1, n_rows=2)
    return asyncio.run(
        builder.build(system=system, tools=(FETCH,), messages=turn, anchor=0, runtime="")
    )


def test_later_runs_do_not_tokenize_the_same_system_prompt_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_runtime.context import tokens

    spy = EncoderSpy(tokens.encoding())
    monkeypatch.setattr(tokens, "encoding", lambda: spy)
    system = f"You are agent {uuid.uuid4().hex}: no earlier test sent this prompt.\n"
    first = build_system(ContextBuilder(), system)  # one run's builder
    second = build_system(ContextBuilder(), system)  # the next run's
    assert spy.texts.count(system) == 1
    expected = count_tokens(system) + MESSAGE_OVERHEAD
    assert first.layers["system"] == second.layers["system"] == expected


def test_a_huge_prompt_or_a_counter_of_ones_own_is_not_shared_between_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_runtime.context import tokens

    spy = EncoderSpy(tokens.encoding())
    monkeypatch.setattr(tokens, "encoding", lambda: spy)
    huge = "word " * 20_000  # past what the shared cache holds (its memory stays bounded)
    for _ in range(2):
        build_system(ContextBuilder(), huge)
    assert spy.texts.count(huge) == 2
    counter = CountingCounter()
    for _ in range(2):
        build_system(ContextBuilder(counter=counter), SYSTEM)
    assert counter.texts.count(SYSTEM) == 2  # it may be a whole model: never kept


def test_the_tools_layer_is_written_once_for_the_same_schemas() -> None:
    from pi_runtime.context import builder as module

    again = ToolDefinition(name=FETCH.name, description=FETCH.description,
                           parameters=FETCH.parameters)  # fmt: skip
    first = module._shared_tools_text((FETCH,))
    assert module._shared_tools_text((again,)) is first  # a new run's definition
    assert json.loads(first) == [FETCH.parameters | {"name": "fetch",
                                 "description": FETCH.description}]  # fmt: skip
    changed = ToolDefinition(name="fetch", description=FETCH.description,
                             parameters={**FETCH.parameters, "required": ["page"]})  # fmt: skip
    assert json.loads(module._shared_tools_text((changed,)))[0]["required"] == ["page"]
    for i in range(100):  # tools listed afresh each run do not pile up
        module._shared_tools_text((ToolDefinition(name=f"t{i}", description="", parameters={}),))
    assert len(module._TOOLS_TEXTS) <= 64


def test_other_tools_on_a_later_turn_are_counted_as_offered() -> None:
    # the tools' text is kept between turns; retrieval may offer other tools each turn
    other = ToolDefinition(
        name="search", description="Search every page for a phrase.", parameters=FETCH.parameters
    )
    builder = ContextBuilder()
    messages = conversation(1, n_rows=5)

    def tools_layer(tools: tuple[ToolDefinition, ...]) -> int:
        built = asyncio.run(builder.build(system="s", tools=tools, messages=messages, anchor=0))
        return built.layers["tools"]

    one, both, none = tools_layer((FETCH,)), tools_layer((FETCH, other)), tools_layer(())

    assert one < both
    assert none == 0
    assert tools_layer((FETCH,)) == one


def test_rewritten_history_is_recounted_from_the_first_changed_message() -> None:
    counter = CountingCounter()
    builder = ContextBuilder(counter=counter)
    messages = conversation(3, n_rows=5)
    build(builder, messages)
    counter.texts.clear()
    # history edited from index 3 on (equal messages, but other objects); the builder
    # notices its last counted message changed and recounts from the first difference
    rewritten = list(messages[:3]) + [replace(m) for m in messages[3:]]
    build(builder, rewritten)
    assert counter.texts == [message_text(m) for m in rewritten[3:]]
    counter.texts.clear()
    shorter = rewritten[:4]
    built = build(builder, shorter)
    assert counter.texts == []
    assert built.layers["context"] == size(shorter[1:])


def test_layer_counts_are_exact_o200k_counts_of_what_is_sent() -> None:
    runtime = "[runtime]\ndate: 2025-01-01\nmode: tools\n[/runtime]"
    messages = conversation(2, n_rows=7)
    built = build(ContextBuilder(), messages, runtime=runtime)
    tools_text = json.dumps(
        [FETCH.parameters | {"name": FETCH.name, "description": FETCH.description}],
        sort_keys=True,
    )
    assert built.steps == ()
    assert built.layers["system"] == count_tokens(SYSTEM) + MESSAGE_OVERHEAD
    assert built.layers["tools"] == count_tokens(tools_text) + MESSAGE_OVERHEAD
    assert built.layers["context"] == size(built.messages[1:])
    # the user layer is the current user message as sent, runtime block included
    assert built.messages[0] == UserMessage(content=f"{runtime}\n\n{TASK}")
    assert built.layers["user"] == size(built.messages[:1])


def test_context_that_fits_is_sent_unchanged() -> None:
    messages = conversation(3, n_rows=20)
    built = build(ContextBuilder(), messages)
    assert built.messages == tuple(messages)
    assert (built.steps, built.dropped, built.truncated, built.summary) == ((), (), (), None)
    assert built.report()["steps"] == []


@pytest.mark.parametrize(
    "field",
    ["context_window", "output_reserve", "max_result_tokens", "keep_recent", "digest_tokens"],
)
def test_nonsense_budget_is_a_clear_error(field: str) -> None:
    with pytest.raises(UserError, match=field):
        Budget(**{field: -1})


# --- compression, cheapest step first -----------------------------------------------------


def test_truncation_cuts_old_results_and_keeps_recent_units_whole() -> None:
    messages = conversation(6, n_rows=100)  # results of ~2000 tokens
    full = size(messages[1:])
    budget = Budget(
        context_window=fixed_layers(messages) + full - 1, output_reserve=0, max_result_tokens=200
    )
    built = build(ContextBuilder(budget), messages)
    assert built.steps == ("truncate_results",)
    assert built.truncated == (2, 4, 6, 8)  # results of the four oldest units
    assert built.dropped == ()
    assert built.messages[9:] == tuple(messages[9:])  # keep_recent=2 units stay whole
    for i in built.truncated:
        original, cut = messages[i], built.messages[i]
        assert isinstance(original, ToolResultMessage) and isinstance(cut, ToolResultMessage)
        head, _, marker = cut.content.partition("\n…[cut: ")
        assert head and original.content.startswith(head)
        assert f"{len(original.content.encode())} bytes in all" in marker
        assert f"result:{original.tool_call_id}" in marker
        assert count_tokens(cut.content) <= budget.max_result_tokens
        assert cut.tool_call_id == original.tool_call_id
    assert built.layers["context"] == size(built.messages[1:])
    assert built.total_tokens <= budget.context_window


def window_case(
    *, digest_tokens: int = 1_000, extra: Sequence[Message] = ()
) -> tuple[list[Message], Budget]:
    """Ten units of two ~1000-token results; the window holds the newest four plus 1000."""
    messages = conversation(10, n_rows=50, calls=2) + list(extra)
    newest = size(messages[19:31])  # units 7..10
    budget = Budget(
        context_window=fixed_layers(messages) + newest + 1_000,
        output_reserve=0,
        max_result_tokens=10_000,  # nothing to cut: the window has to act
        digest_tokens=digest_tokens,
    )
    return messages, budget


def test_window_drops_whole_oldest_units_and_digests_every_dropped_call() -> None:
    messages, budget = window_case()
    built = build(ContextBuilder(budget), messages)
    assert built.steps == ("window",)
    assert built.dropped == ((1, 19),)  # six whole units of assistant + two results
    assert_calls_paired(built.messages)
    note = built.messages[1]
    assert isinstance(note, UserMessage) and note.content == built.summary
    assert note.content.startswith("[Earlier in this conversation: 6 exchange(s) left out")
    assert built.messages[0].content == TASK
    assert built.messages[2:] == tuple(messages[19:])
    for message in messages[1:19]:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                assert f"fetch({call.raw})" in note.content  # name and key arguments
        elif isinstance(message, ToolResultMessage):
            assert " ".join(message.content.split())[:60] in note.content  # result head
    assert built.layers["context"] == size(built.messages[1:])
    assert built.total_tokens <= budget.context_window


def test_summary_only_when_the_digest_does_not_fit() -> None:
    summariser = FakeSummariser()
    messages, budget = window_case()  # the digest fits: no summary
    built = build(ContextBuilder(budget, summariser=summariser), messages)
    assert built.steps == ("window",)
    assert summariser.inputs == []

    messages, budget = window_case(digest_tokens=50)
    built = build(ContextBuilder(budget, summariser=summariser), messages)
    assert built.steps == ("window", "summary")
    assert len(summariser.inputs) == 1
    for message in messages[1:19]:
        for call in message.tool_calls if isinstance(message, AssistantMessage) else ():
            assert f"fetch({call.raw})" in summariser.inputs[0]
    assert built.summary is not None and "SUMMARY#1 of the early pages" in built.summary
    assert built.summary.startswith("[Earlier in this conversation: 6 exchange(s)")
    assert_calls_paired(built.messages)


def test_the_build_report_names_the_template_a_model_summary_was_written_under() -> None:
    messages, budget = window_case(digest_tokens=50)
    summariser = model_summariser(ScriptedModel([{"text": "pages 1-6: rows"}]))

    built = build(ContextBuilder(budget, summariser=summariser), messages)

    assert built.steps == ("window", "summary")
    assert built.report()["summariser"] == load_template("summariser").ref
    plain = build(ContextBuilder(budget, summariser=FakeSummariser()), messages)
    assert "summariser" not in plain.report()  # a summariser of one's own has no template
    assert "summariser" not in build(ContextBuilder(budget), messages).report()


def test_summariser_runs_once_per_dropped_prefix_not_every_turn() -> None:
    summariser = FakeSummariser()
    tiny = exchange(11, n_rows=1)  # a cheap next turn: the same six units stay dropped
    messages, budget = window_case(digest_tokens=50, extra=tiny)
    builder = ContextBuilder(budget, summariser=summariser)
    first = build(builder, messages[: -len(tiny)])
    again = build(builder, messages[: -len(tiny)])
    next_turn = build(builder, messages)
    assert first.dropped == again.dropped == next_turn.dropped == ((1, 19),)
    assert len(summariser.inputs) == 1
    assert next_turn.summary == first.summary
    grown = build(builder, messages + exchange(12, n_rows=50, calls=2))
    assert grown.dropped != first.dropped
    assert len(summariser.inputs) == 2  # a new prefix, a new summary


def test_without_summariser_the_oldest_digest_lines_go() -> None:
    messages, budget = window_case(digest_tokens=150)
    built = build(ContextBuilder(budget), messages)
    assert built.steps == ("window",)
    assert built.summary is not None
    assert count_tokens(built.summary) <= 150
    assert 'fetch({"page":6,"part":1})' in built.summary  # the newest dropped call stays
    assert 'fetch({"page":1,"part":0})' not in built.summary  # the oldest went first
    assert built.summary.startswith("[Earlier in this conversation: 6 exchange(s)")


def test_steps_run_in_order_truncate_then_window_then_summary() -> None:
    summariser = FakeSummariser()
    messages = conversation(10, n_rows=100)
    budget = Budget(
        context_window=fixed_layers(messages) + size(messages[17:]) + 300,
        output_reserve=0,
        max_result_tokens=200,
        digest_tokens=20,
    )
    built = build(ContextBuilder(budget, summariser=summariser), messages)
    assert built.steps == ("truncate_results", "window", "summary")
    assert built.truncated and built.dropped and len(summariser.inputs) == 1
    assert built.messages[-4:] == tuple(messages[-4:])  # the protected units, whole
    assert_calls_paired(built.messages)
    report = built.report()
    assert report["steps"] == ["truncate_results", "window", "summary"]
    assert report["dropped"] == [list(r) for r in built.dropped]
    assert report["truncated"] == list(built.truncated)
    assert sum(report["tokens"].values()) == built.total_tokens


def test_anchor_in_the_middle_is_never_dropped() -> None:
    earlier = conversation(4, n_rows=50)  # a previous run of the same session
    now = [UserMessage(content="Now the second half."), *exchange(9, n_rows=50)]
    now += exchange(10, n_rows=50)
    messages = earlier + now
    anchor = len(earlier)
    budget = Budget(context_window=2_500, output_reserve=0, max_result_tokens=10_000)
    built = build(ContextBuilder(budget), messages, anchor=anchor, runtime="[runtime][/runtime]")
    assert "window" in built.steps
    assert built.dropped[0][0] == 0  # the earliest conversation goes first
    assert UserMessage(content="[runtime][/runtime]\n\nNow the second half.") in built.messages
    assert_calls_paired(built.messages)


def test_system_tools_and_user_are_sent_whole_even_over_the_window() -> None:
    # Only the context layer is ever compressed: a request whose fixed layers alone exceed
    # the window still goes out whole (the provider, not the builder, may refuse it).
    system = SYSTEM + rows(0, 200)
    messages = conversation(6, n_rows=50)
    builder = ContextBuilder(Budget(context_window=1_000, output_reserve=0))
    built = asyncio.run(builder.build(system=system, tools=(FETCH,), messages=messages, anchor=0))
    assert built.layers["system"] == count_tokens(system) + MESSAGE_OVERHEAD
    assert built.layers["system"] > 1_000
    assert built.messages[0] == UserMessage(content=TASK)
    assert built.dropped == ((1, 9),)  # everything but the two protected units
    assert built.messages[-4:] == tuple(messages[-4:])
    assert_calls_paired(built.messages)


def summarise_with(model: ScriptedModel, text: str) -> str:
    async def go() -> str:
        return await model_summariser(model)(text)

    return asyncio.run(go())


def test_model_summariser_makes_one_call_without_tools() -> None:
    model = ScriptedModel([{"text": "fetch pages 1-6: rows of skus"}])
    assert summarise_with(model, '- fetch({"page":1}) → rows') == "fetch pages 1-6: rows of skus"
    assert len(model.requests) == 1
    request = model.requests[0]
    assert request.tool_choice == "none"
    assert request.tools == ()
    assert request.messages == (UserMessage(content='- fetch({"page":1}) → rows'),)


def test_model_summariser_says_nothing_when_the_model_writes_nothing() -> None:
    # not the digest it was given, which did not fit: the builder trims that instead
    # (test_context_notes.py)
    model = ScriptedModel([{"tool_calls": [{"name": "fetch", "arguments": {"page": 1}}]}])
    assert summarise_with(model, "the digest") == ""


# --- scenarios through Agent -----------------------------------------------------------


@tool
def fetch(page: int) -> str:
    """Fetch one page of the quarterly report.

    Pages are long; read them one at a time.

    Args:
        page: which page, from 1.
    """
    return rows(page, 300)[:12_000]  # ~2700 tokens, under the gate's 16 KB cap


def paging_script(pages: int, *, usage: dict[str, int] | None = None) -> list[dict[str, Any]]:
    extra = {"usage": usage} if usage else {}
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "fetch", "arguments": {"page": p}}], **extra}
        for p in range(1, pages + 1)
    ]
    return [*steps, {"text": "The report is summarised.", **extra}]


def run_pages(pages: int, budget: Budget | None = None, **kwargs: Any) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(paging_script(pages))
    agent = Agent(
        model,
        tools=[fetch],
        budget=budget,
        trace_dir=False,
        **kwargs,
        limits=Limits(max_steps=pages + 2),
    )
    result = agent.run_sync(TASK)
    assert result.stop_reason == "final_answer", result.error
    assert len(model.requests) == pages + 1
    return model, result


def provider_prefix(request: ModelRequest) -> bytes:
    """What a provider caches first: the system text, then the tool definitions."""
    tools = json.dumps([asdict(t) for t in request.tools], sort_keys=True)
    return request.system.encode() + b"\x00" + tools.encode()


def requested(result: Any) -> list[ModelRequested]:
    return [e for e in result.events if isinstance(e, ModelRequested)]


TIGHT = Budget(context_window=6_000, output_reserve=500, max_result_tokens=300)


@pytest.mark.parametrize("budget", [None, TIGHT], ids=["roomy", "compressed"])
def test_system_and_tools_prefix_is_byte_identical_on_every_request(budget: Budget | None) -> None:
    before = date.today().isoformat()
    model, result = run_pages(8, budget)
    after = date.today().isoformat()
    first = model.requests[0]
    for request in model.requests:
        assert request.system == first.system
        assert request.tools == first.tools
        assert provider_prefix(request) == provider_prefix(first)
    # the dynamic runtime block is after the prefix, in front of the current user message
    assert "[runtime]" not in first.system and before not in first.system
    for request in model.requests:
        user = request.messages[0]
        assert isinstance(user, UserMessage)
        assert user.content.startswith("[runtime]\n") and user.content.endswith(TASK)
        assert any(f"today: {d[5:]} (" in user.content for d in (before, after))
    steps = {s for e in requested(result) for s in e.context["steps"]}
    assert bool(steps) == (budget is not None)  # the tight budget really compressed


def test_roomy_requests_extend_the_previous_request() -> None:
    model, _ = run_pages(5)
    for previous, current in zip(model.requests, model.requests[1:], strict=False):
        assert current.messages[: len(previous.messages)] == previous.messages


def test_tiny_budget_never_trims_system_or_current_user_message() -> None:
    agent = Agent(ScriptedModel([]), tools=[fetch], trace_dir=False)
    _, probe = run_pages(1)
    fixed = sum(v for k, v in requested(probe)[0].context["tokens"].items() if k != "context")
    budget = Budget(
        context_window=fixed + 1_500, output_reserve=200, max_result_tokens=200, keep_recent=1
    )
    model, result = run_pages(12, budget)
    events = requested(result)
    for request, event in zip(model.requests, events, strict=True):
        assert request.system == agent.system
        assert event.context["tokens"]["system"] == events[0].context["tokens"]["system"]
        assert event.context["tokens"]["user"] == events[0].context["tokens"]["user"]
        assert message_text(request.messages[0]).endswith(TASK)
        assert_calls_paired(request.messages)
    # only the context layer shrinks: late turns carry far less than the full history
    last = events[-1].context["tokens"]["context"]
    assert last < size(result.messages[1:]) / 5
    assert "window" in events[-1].context["steps"]


def test_run_proceeds_when_the_fixed_layers_alone_exceed_the_window() -> None:
    budget = Budget(context_window=100, output_reserve=50)
    model, result = run_pages(4, budget)
    system = Agent(ScriptedModel([]), tools=[fetch], trace_dir=False).system
    for request, event in zip(model.requests, requested(result), strict=True):
        assert request.system == system
        assert message_text(request.messages[0]).endswith(TASK)
        assert event.input_tokens > budget.context_window
        assert_calls_paired(request.messages)


def test_trace_records_how_each_context_was_built(tmp_path: Any) -> None:
    model = ScriptedModel(paging_script(8))
    agent = Agent(model, tools=[fetch], budget=TIGHT, trace_dir=tmp_path)
    result = agent.run_sync(TASK)
    assert result.trace is not None
    lines = [e for e in read_trace(result.trace) if e["kind"] == "model_request"]
    assert len(lines) == 9
    for line in lines:
        context = line["context"]
        assert set(context) >= {"anchor", "tokens", "steps", "dropped", "truncated"}
        assert context["anchor"] == 0
        assert sum(context["tokens"].values()) == line["input_tokens"]
        assert set(context["tokens"]) == {"system", "tools", "user", "context"}
        if "window" in context["steps"]:
            assert line["summary"].startswith("[Earlier in this conversation:")
            assert all(len(r) == 2 and r[0] < r[1] for r in context["dropped"])
        else:
            assert line["summary"] is None and context["dropped"] == []
    last = lines[-1]["context"]
    assert last["steps"][:2] == ["truncate_results", "window"]
    assert last["truncated"] and last["dropped"]


def test_summariser_in_a_run_is_called_once_per_dropped_prefix() -> None:
    summariser = FakeSummariser()
    # room for the two newest pages whole (~5,400 tokens each) and the summary: a summary
    # that does not fit the room is not sent
    budget = Budget(
        context_window=12_000, output_reserve=500, max_result_tokens=300, digest_tokens=30
    )
    _, result = run_pages(10, budget, summariser=summariser)
    summarised = [e for e in requested(result) if "summary" in e.context["steps"]]
    assert summarised
    assert not any(e.context["over_budget"] for e in requested(result))
    prefixes = {json.dumps(e.context["dropped"]) for e in summarised}
    assert len(summariser.inputs) == len(prefixes)
    for event in summarised:
        assert event.summary is not None and "SUMMARY#" in event.summary


def test_thirty_turns_send_far_fewer_input_tokens_than_naive_history() -> None:
    budget = Budget(context_window=32_000)
    _, result = run_pages(30, budget)
    events = requested(result)
    sent = sum(e.input_tokens for e in events)
    prefix = events[0].context["tokens"]["system"] + events[0].context["tokens"]["tools"]
    # a naive loop resends the whole history: the first `message_count` messages each time
    naive = sum(prefix + size(result.messages[: e.message_count]) for e in events)
    assert sent < naive
    assert any("truncate_results" in e.context["steps"] for e in events)
    assert all(e.input_tokens <= budget.context_window for e in events)


def test_model_without_usage_gets_counted_usage() -> None:
    _, result = run_pages(2)
    responses = [e for e in result.events if isinstance(e, ModelResponded)]
    for request, response in zip(requested(result), responses, strict=True):
        assert response.usage_source == "counted"
        assert response.message.usage.input_tokens == request.input_tokens > 0
    final = responses[-1].message
    assert final.usage.output_tokens == count_tokens(message_text(final))


def test_model_reporting_usage_keeps_it() -> None:
    usage = {"input_tokens": 1234, "output_tokens": 7}
    model = ScriptedModel(paging_script(2, usage=usage))
    result = Agent(model, tools=[fetch], trace_dir=False).run_sync(TASK)
    responses = [e for e in result.events if isinstance(e, ModelResponded)]
    assert [r.usage_source for r in responses] == ["provider"] * 3
    assert all(r.message.usage.input_tokens == 1234 for r in responses)
    assert result.usage.input_tokens == 3 * 1234
