"""What a request has already spent, read back from the conversation.

A durable session answers one request over several runs: a run stops `awaiting` a
background job, the job's result is delivered into the conversation, and a continuation
run picks up from there. Guards cover the whole request, so a continuation starts from
what the earlier runs spent, not from zero. The conversation is the only record every
worker shares, so the carry is derived from it, purely, with the same hashing `act`
uses: a run that continues sees exactly the state it would have had running straight on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from ..messages.canonical import action_hash, text_hash

KEEP = 64
"""How many recent hashes a run keeps: enough for any window, bounded so turns stay O(1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Carry:
    """The guard state of the current request, as earlier runs left it.

    Attributes:
        anchor: index of the request's user message (-1: the conversation has none).
        steps: model calls made for the request (its assistant messages).
        tokens: input + output tokens those calls used, sub-agents' included.
        cost_usd: what those calls cost (None: some call's price is unknown).
        actions: canonical hashes of the request's tool calls, oldest first.
        results: hashes of (call, result) pairs of the calls that have a result.
        consecutive_errors: failed tool results in a row at the end, in call order.
        tool_calls: tool calls the model made for the request.
        repairs: contract repair turns sent.
        tool_limit_notice: the model was already told its tool calls are used up.
    """

    anchor: int = -1
    steps: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0
    actions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    consecutive_errors: int = 0
    tool_calls: int = 0
    repairs: int = 0
    tool_limit_notice: bool = False


def request_anchor(messages: Sequence[Message]) -> int:
    """Index of the last turn the user wrote (runtime-added user turns don't count), or -1."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage) and message.is_request:
            return i
    return -1


def carry(messages: Sequence[Message]) -> Carry:
    """The guard state of the request the conversation ends in.

    Everything after the request's user message belongs to it (all of the conversation
    when there is none). Calls are taken in the order the model made them; a call's
    result counts wherever it arrived (a background job's comes runs later).
    """
    anchor = request_anchor(messages)
    turns = messages[anchor + 1 :]
    answers: dict[str, ToolResultMessage] = {}
    for message in turns:
        if isinstance(message, ToolResultMessage):
            answers.setdefault(message.tool_call_id, message)
    steps = tokens = tool_calls = repairs = consecutive = 0
    cost: float | None = 0.0
    notice = False
    actions: list[str] = []
    results: list[str] = []
    for message in turns:
        if isinstance(message, UserMessage):
            repairs += message.origin == "contract_repair"
            notice = notice or message.origin == "tool_limit"
            continue
        if isinstance(message, ToolResultMessage) and message.usage is not None:
            # what a sub-agent spent answering the call counts for the request too
            tokens += message.usage.total_tokens
            spent = message.usage.cost_usd
            cost = None if cost is None or spent is None else cost + spent
            continue
        if not isinstance(message, AssistantMessage):
            continue
        steps += 1
        tokens += message.usage.total_tokens
        spent = message.usage.cost_usd
        cost = None if cost is None or spent is None else cost + spent
        for call in message.tool_calls:
            tool_calls += 1
            digest = action_hash(call.name, call.arguments, call.raw)
            actions.append(digest)
            answer = answers.get(call.id)
            if answer is None:
                continue  # still with a background job
            results.append(f"{digest}:{text_hash(answer.content)}")
            consecutive = consecutive + 1 if answer.is_error else 0
    return Carry(
        anchor=anchor,
        steps=steps,
        tokens=tokens,
        cost_usd=cost,
        actions=tuple(actions[-KEEP:]),
        results=tuple(results[-KEEP:]),
        consecutive_errors=consecutive,
        tool_calls=tool_calls,
        repairs=repairs,
        tool_limit_notice=notice,
    )
