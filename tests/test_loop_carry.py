"""`carry`: the guard state of a request, read back from the conversation it left.

A continuation run must start from what its request already spent; these tests pin what
counts (everything after the user's own message) and how (the hashes `act` uses).
"""

from __future__ import annotations

from typing import Any

from pi_runtime.loop.carry import KEEP, Carry, carry, request_anchor
from pi_runtime.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_dict,
    message_to_dict,
    messages_to_list,
)
from pi_runtime.messages.canonical import action_hash, text_hash


def asks(*calls: tuple[str, str, dict[str, Any]], tokens: int = 10) -> AssistantMessage:
    """An assistant turn making `calls` (id, name, arguments)."""
    return AssistantMessage(
        content=tuple(
            ToolCall(id=i, name=n, raw=str(a).replace("'", '"'), arguments=a) for i, n, a in calls
        ),
        finish_reason="tool_calls",
        usage=Usage(input_tokens=tokens, output_tokens=1),
    )


def answer(call_id: str, content: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, name="t", content=content, is_error=error)


def test_a_conversation_without_turns_after_the_request_carries_nothing() -> None:
    assert carry([]) == Carry()
    assert carry([UserMessage(content="hi")]) == Carry(anchor=0)


def test_everything_after_the_users_message_counts_and_nothing_before_it() -> None:
    earlier: list[Message] = [
        UserMessage(content="first request"),
        asks(("c0", "t", {"x": 1}), tokens=500),
        answer("c0", "one"),
        AssistantMessage(content=(TextBlock(text="done"),), usage=Usage(input_tokens=7)),
    ]
    current: list[Message] = [
        UserMessage(content="second request"),
        asks(("c1", "t", {"x": 1}), ("c2", "t", {"x": 2}), tokens=100),
        answer("c1", "one"),
        answer("c2", "two"),
        asks(("c3", "t", {"x": 1}), tokens=200),
        answer("c3", "one"),
    ]
    got = carry(earlier + current)

    a1, a2 = action_hash("t", {"x": 1}, ""), action_hash("t", {"x": 2}, "")
    assert got.anchor == 4
    assert (got.steps, got.tokens, got.tool_calls) == (2, 302, 3)
    assert got.actions == (a1, a2, a1)
    assert got.results == (
        f"{a1}:{text_hash('one')}",
        f"{a2}:{text_hash('two')}",
        f"{a1}:{text_hash('one')}",
    )


def test_a_contract_repair_turn_is_not_the_request_and_is_counted() -> None:
    messages: list[Message] = [
        UserMessage(content="weather?"),
        AssistantMessage(content=(TextBlock(text="sunny"),), usage=Usage(output_tokens=3)),
        UserMessage(content="Your answer does not match ...", origin="contract_repair"),
        asks(("c1", "t", {"city": "x"})),
        answer("c1", "18C"),
    ]
    got = carry(messages)
    assert got.anchor == 0
    assert (got.steps, got.repairs, got.tool_calls) == (2, 1, 1)


def test_the_tool_limit_notice_is_not_the_request_and_is_remembered() -> None:
    messages: list[Message] = [
        UserMessage(content="go"),
        asks(("c1", "t", {})),
        answer("c1", "r"),
        UserMessage(content="no more tools", origin="tool_limit"),
    ]
    assert request_anchor(messages) == 0
    assert carry(messages).tool_limit_notice is True


def test_errors_in_a_row_follow_call_order_and_reset_on_success() -> None:
    messages: list[Message] = [
        UserMessage(content="go"),
        asks(("c1", "t", {"n": 1}), ("c2", "t", {"n": 2})),
        answer("c1", "bad", error=True),
        answer("c2", "ok"),
        asks(("c3", "t", {"n": 3})),
        answer("c3", "bad", error=True),
        asks(("c4", "t", {"n": 4})),
        answer("c4", "bad", error=True),
    ]
    assert carry(messages).consecutive_errors == 2


def test_a_background_call_counts_at_once_and_its_result_once_delivered() -> None:
    waiting: list[Message] = [UserMessage(content="go"), asks(("job-call", "bg", {"d": 30}))]
    digest = action_hash("bg", {"d": 30}, "")
    assert (carry(waiting).actions, carry(waiting).results) == ((digest,), ())

    delivered = [*waiting, answer("job-call", "+3.2%")]
    assert carry(delivered).results == (f"{digest}:{text_hash('+3.2%')}",)


def test_hashes_are_bounded_like_the_runs_own() -> None:
    messages: list[Message] = [UserMessage(content="go")]
    for i in range(KEEP + 10):
        messages += [asks((f"c{i}", "t", {"i": i})), answer(f"c{i}", str(i))]
    got = carry(messages)
    assert len(got.actions) == len(got.results) == KEEP
    assert got.actions[-1] == action_hash("t", {"i": KEEP + 9}, "")
    assert got.tool_calls == KEEP + 10


def test_user_turns_keep_their_stored_shape_and_runtime_turns_say_where_they_come_from() -> None:
    plain = UserMessage(content="hi")
    repair = UserMessage(content="fix it", origin="contract_repair")
    # a plain turn is stored exactly as before `origin` existed
    assert message_to_dict(plain) == {"role": "user", "content": "hi"}
    assert messages_to_list([repair]) == [
        {"role": "user", "content": "fix it", "origin": "contract_repair"}
    ]
    assert message_from_dict(message_to_dict(repair)) == repair
    # messages stored before `origin` existed read back as the user's own
    assert message_from_dict({"role": "user", "content": "hi"}) == plain
