"""Cross-provider history: a conversation recorded on one provider continues on another."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest

from pi_runtime import (
    AssistantMessage,
    Message,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from pi_runtime.models._anthropic_request import REDACTED_THINKING_PREFIX, anthropic_body
from pi_runtime.models.history import (
    HistoryTarget,
    history_target,
    normalise_history,
    provider_of,
)

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def call(id: str, name: str = "get_weather", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, raw=json.dumps(arguments), arguments=arguments)


def result(id: str, content: str = "ok", name: str = "get_weather") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=id, name=name, content=content)


def assistant(*blocks: Any, model: str | None = "openai:gpt-4o") -> AssistantMessage:
    return AssistantMessage(content=tuple(blocks), model=model)


# Recorded on OpenAI-compatible servers: Responses-style ids with `|`, Kimi-style ids with
# `.` and `:`, and ids longer than Anthropic's 64 characters.
LONG_ID = "call_" + "x" * 70
OPENAI_CONVERSATION: tuple[Message, ...] = (
    UserMessage(content="明天北京天气，并创建提醒"),
    assistant(
        ThinkingBlock(text="Need the weather first."),
        TextBlock(text="Checking.", phase="commentary"),
        call("fc_68a1b2|call_Q2xLm", city="北京"),
        call("functions.get_weather:1", city="上海"),
        model="deepseek:deepseek-reasoner",
    ),
    result("fc_68a1b2|call_Q2xLm", '{"temp":31,"rain":true}'),
    result("functions.get_weather:1", '{"temp":28,"rain":false}'),
    assistant(call(LONG_ID, "create_reminder", title="带伞", time="07:00")),
    result(LONG_ID, "ok", "create_reminder"),
    assistant(TextBlock(text="Done: take an umbrella.")),
    UserMessage(content="Thanks! And the day after?"),
)


def ids_in(messages: tuple[Message, ...]) -> tuple[list[str], list[str]]:
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    return calls, results


def test_openai_style_ids_are_rewritten_for_anthropic_consistently() -> None:
    out = normalise_history(OPENAI_CONVERSATION, target="anthropic")
    calls, results = ids_in(out)
    assert len(calls) == 3
    assert all(ANTHROPIC_ID.match(i) and len(i) <= 64 for i in calls)
    assert calls == results  # every result still answers its own call
    assert calls[0].startswith("fc_68a1b2_call_Q2xLm_")
    assert calls[1].startswith("functions_get_weather_1_")
    assert len(set(calls)) == 3


def test_ids_the_target_accepts_are_kept() -> None:
    history = (
        UserMessage(content="hi"),
        assistant(call("toolu_01T1x1fJ34qAmk2tNTrN7Up6")),
        result("toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
    )
    assert normalise_history(history, target="openai") == history
    assert normalise_history(history, target="anthropic") == history


def test_anthropic_ids_are_shortened_for_openai_limit_of_40() -> None:
    long_id = "toolu_" + "A1" * 29  # 64 characters: fine for Anthropic, too long for OpenAI
    history = (UserMessage(content="hi"), assistant(call(long_id)), result(long_id))
    calls, results = ids_in(normalise_history(history, target="openai"))
    assert len(calls[0]) <= 40 and calls == results


def test_rewriting_is_deterministic_and_prefix_stable() -> None:
    whole = normalise_history(OPENAI_CONVERSATION, target="anthropic")
    assert normalise_history(OPENAI_CONVERSATION, target="anthropic") == whole
    # a longer conversation keeps the earlier messages byte-identical: prompt caches still hit
    prefix = normalise_history(OPENAI_CONVERSATION[:4], target="anthropic")
    assert whole[: len(prefix)] == prefix


def test_ids_repeated_across_turns_get_distinct_ids() -> None:
    history = (
        UserMessage(content="two lookups"),
        assistant(call("call_0", city="a")),
        result("call_0", "A"),
        assistant(call("call_0", city="b")),
        result("call_0", "B"),
    )
    out = normalise_history(history, target="anthropic")
    calls, results = ids_in(out)
    assert calls[0] == "call_0" and calls[1] != "call_0"
    assert calls == results
    assert [m.content for m in out if isinstance(m, ToolResultMessage)] == ["A", "B"]


def test_foreign_thinking_becomes_commentary_text_for_anthropic() -> None:
    out = normalise_history(OPENAI_CONVERSATION, target="anthropic")
    first = out[1]
    assert isinstance(first, AssistantMessage)
    assert first.content[0] == TextBlock(text="Need the weather first.", phase="commentary")
    assert not any(
        isinstance(b, ThinkingBlock)
        for m in out
        if isinstance(m, AssistantMessage)
        for b in m.content
    )


def test_own_signed_thinking_is_kept_for_anthropic_and_unsigned_is_not() -> None:
    signed = ThinkingBlock(text="plan", signature="EqQBCkgIBxAB")
    unsigned = ThinkingBlock(text="cut off before its signature")
    history = (
        UserMessage(content="hi"),
        assistant(signed, unsigned, TextBlock(text="ok"), model="anthropic:claude-sonnet-4-6"),
    )
    (_, message) = normalise_history(history, target="anthropic")
    assert isinstance(message, AssistantMessage)
    assert message.content == (
        signed,
        TextBlock(text="cut off before its signature", phase="commentary"),
        TextBlock(text="ok"),
    )


def test_anthropic_thinking_becomes_text_on_openai_and_redacted_thinking_is_dropped() -> None:
    history = (
        UserMessage(content="hi"),
        assistant(
            ThinkingBlock(text="", signature=REDACTED_THINKING_PREFIX + "EmwKAhgB"),
            ThinkingBlock(text="weather first", signature="EqQB"),
            call("toolu_01"),
            model="anthropic:claude-sonnet-4-6",
        ),
        result("toolu_01"),
    )
    message = normalise_history(history, target="openai")[1]
    assert isinstance(message, AssistantMessage)
    assert message.content == (
        TextBlock(text="weather first", phase="commentary"),
        call("toolu_01"),
    )


def test_same_provider_thinking_is_kept_for_openai_compatible_vendors() -> None:
    thinking = ThinkingBlock(text="reasoning_content from DeepSeek")
    history = (UserMessage(content="hi"), assistant(thinking, model="deepseek:deepseek-reasoner"))
    assert normalise_history(history, target="deepseek")[1] == history[1]
    converted = normalise_history(history, target="openai")[1]
    assert isinstance(converted, AssistantMessage)
    assert converted.content == (TextBlock(text=thinking.text, phase="commentary"),)


def test_drop_policy_removes_thinking_and_empty_messages() -> None:
    target = HistoryTarget(provider="tiny", id_max_length=40, thinking="drop")
    history = (
        UserMessage(content="hi"),
        assistant(ThinkingBlock(text="only thoughts")),
        assistant(TextBlock(text=""), TextBlock(text="answer")),
    )
    assert normalise_history(history, target=target) == (
        UserMessage(content="hi"),
        assistant(TextBlock(text="answer")),
    )


def test_call_without_result_gets_an_explicit_missing_result_error() -> None:
    history = (
        UserMessage(content="weather in two cities"),
        assistant(call("call_a", city="北京"), call("call_b", city="上海")),
        result("call_a", "sunny"),
        UserMessage(content="never mind"),
        assistant(call("call_c", "create_reminder", title="x")),
    )
    out = normalise_history(history, target="anthropic")
    kinds = [type(m).__name__ for m in out]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    filled = [m for m in out if isinstance(m, ToolResultMessage) and m.is_error]
    assert [(m.tool_call_id, m.name) for m in filled] == [
        ("call_b", "get_weather"),
        ("call_c", "create_reminder"),
    ]
    for message in filled:
        assert message.error is not None and message.error.kind == "missing_result"
        assert json.loads(message.content)["kind"] == "missing_result"
        assert "may or may not have run" in json.loads(message.content)["hint"]


def test_orphan_result_becomes_a_note_and_a_duplicate_is_dropped() -> None:
    history = (
        UserMessage(content="hi"),
        result("call_zz", "42", "lookup"),
        assistant(call("call_a")),
        result("call_a", "first"),
        result("call_a", "again"),
        result("call_x", "stray", "lookup"),
        UserMessage(content="next"),
    )
    out = normalise_history(history, target="anthropic")
    assert [type(m).__name__ for m in out] == [
        "UserMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
        "UserMessage",
    ]
    first_note, stray_note = out[1], out[4]
    assert isinstance(first_note, UserMessage) and first_note.content.endswith("\n42")
    assert "lookup" in first_note.content and "call_zz" in first_note.content
    assert isinstance(stray_note, UserMessage) and stray_note.content.endswith("\nstray")
    assert [m.content for m in out if isinstance(m, ToolResultMessage)] == ["first"]


def test_notes_wait_until_the_call_group_is_complete() -> None:
    history = (
        UserMessage(content="hi"),
        assistant(call("call_a"), call("call_b")),
        result("call_a"),
        result("call_stray", "stray"),
        result("call_b"),
    )
    out = normalise_history(history, target="anthropic")
    assert [type(m).__name__ for m in out][2:] == [
        "ToolResultMessage",
        "ToolResultMessage",
        "UserMessage",
    ]


def test_provider_of_reads_the_model_prefix() -> None:
    assert provider_of(assistant(model="anthropic:claude-sonnet-4-6")) == "anthropic"
    assert provider_of(assistant(model="gpt-4o")) is None
    assert provider_of(assistant(model=None)) is None
    assert history_target("ollama").id_max_length == 40
    assert history_target("anthropic").thinking == "signed"


def anthropic_turn_rules_hold(body: dict[str, Any]) -> None:
    """The Messages API's structural rules for a conversation with tool use."""
    messages = body["messages"]
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for index, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        for block in message["content"]:
            assert block.get("text", "x") != "", "empty text blocks are rejected"
        if not uses:
            continue
        assert all(ANTHROPIC_ID.match(i) for i in uses)
        following = messages[index + 1]["content"]
        answers = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
        assert sorted(answers) == sorted(uses)
        # tool results come first in the user turn that follows
        assert [b["type"] for b in following[: len(answers)]] == ["tool_result"] * len(answers)


def test_openai_conversation_continued_on_anthropic_is_a_valid_request() -> None:
    history = (
        *OPENAI_CONVERSATION[:3],  # the second call's result never arrived
        UserMessage(content="Also remind me at 7."),
        result("stray", "late"),
    )
    request = ModelRequest(
        system="weather assistant",
        messages=history,
        tools=(ToolDefinition(name="get_weather", description="", parameters={"type": "object"}),),
    )
    body = anthropic_body(
        request, model="claude-sonnet-4-6", max_tokens=512, thinking=None, cache=True
    )
    anthropic_turn_rules_hold(body)
    first_results = body["messages"][2]["content"]
    assert [b.get("is_error", False) for b in first_results[:2]] == [False, True]
    assert "missing_result" in first_results[1]["content"]
    # the user's text and the stray note follow the results in the same user turn
    texts = [b["text"] for b in first_results if b["type"] == "text"]
    assert texts[0] == "Also remind me at 7." and texts[1].endswith("late")


@pytest.mark.parametrize("target", ["anthropic", "openai", "deepseek"])
def test_normalising_twice_changes_nothing(target: str) -> None:
    once = normalise_history(OPENAI_CONVERSATION, target=target)
    assert normalise_history(once, target=target) == once
