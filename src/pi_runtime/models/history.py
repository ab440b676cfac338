"""Cross-provider history: a conversation started on one provider continues on another.

`normalise_history` is a pure function over neutral messages that an adapter applies
before encoding a request. It makes any recorded conversation acceptable to its target:

- tool-call ids are rewritten to what the target accepts (characters, length, unique),
  the same way for a call and its result;
- thinking the target cannot take back (another provider's, or unsigned where a
  signature is required) becomes commentary text, or is dropped when empty;
- a tool call left without a result gets an explicit error result of kind
  `missing_result`; a duplicate result is dropped; a result with no call before it
  becomes a user note, so its content is not lost;
- empty text blocks and assistant messages left empty are removed.

The provider a message came from is the prefix of its `model` (`anthropic:claude-…`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from ..messages import (
    AssistantMessage,
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolErrorKind,
    ToolResultMessage,
    UserMessage,
    tool_error_info,
    tool_error_result,
)

__all__ = [
    "MISSING_RESULT",
    "HistoryTarget",
    "ThinkingPolicy",
    "history_target",
    "normalise_history",
    "provider_of",
]

ThinkingPolicy: TypeAlias = Literal["signed", "same_provider", "text", "drop"]
"""What happens to thinking: `signed` keeps the target's own signed blocks, `same_provider`
keeps the target's own blocks; other blocks become text. `text` turns all into text;
`drop` removes all."""

MISSING_RESULT = tool_error_info(
    ToolErrorKind.MISSING_RESULT,
    "no result was recorded for this call; the conversation moved on without it",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryTarget:
    """What a provider accepts in a request's history."""

    provider: str
    id_max_length: int
    thinking: ThinkingPolicy
    id_chars: str = "A-Za-z0-9_-"
    """The characters an id may hold, as the body of a regex character class."""


_TARGETS = {
    # Anthropic: ids ^[a-zA-Z0-9_-]+$, thinking sent back only with its signature
    "anthropic": HistoryTarget(provider="anthropic", id_max_length=64, thinking="signed"),
    # OpenAI Chat Completions: tool_call ids of at most 40 characters
    "openai": HistoryTarget(provider="openai", id_max_length=40, thinking="same_provider"),
}


def history_target(provider: str) -> HistoryTarget:
    """The rules for `provider`; OpenAI-compatible vendors share OpenAI's id rules."""
    return _TARGETS.get(provider) or replace(_TARGETS["openai"], provider=provider)


def provider_of(message: AssistantMessage) -> str | None:
    """The provider that wrote `message`, from its `model` (`anthropic:claude-…`)."""
    if message.model and ":" in message.model:
        return message.model.partition(":")[0]
    return None


def normalise_history(
    messages: Iterable[Message], *, target: str | HistoryTarget
) -> tuple[Message, ...]:
    """`messages` rewritten so that the `target` provider accepts them (see module doc)."""
    rules = history_target(target) if isinstance(target, str) else target
    ids = _IdMap(rules)
    out: list[Message] = []
    waiting: list[tuple[str, ToolCall]] = []  # (original id, rewritten call) without a result
    answered: set[str] = set()
    notes: list[Message] = []

    def settle() -> None:
        """Close the current tool-call group: fill missing results, then add notes."""
        out.extend(_missing_result(call) for _, call in waiting)
        out.extend(notes)
        waiting.clear()
        answered.clear()
        notes.clear()

    for message in messages:
        if isinstance(message, ToolResultMessage):
            old = message.tool_call_id
            match = next((i for i, (o, _) in enumerate(waiting) if o == old), None)
            if match is not None:
                answered.add(old)
                call = waiting.pop(match)[1]
                out.append(replace(message, tool_call_id=call.id))
            elif old not in answered and message.content:
                notes.append(_orphan_note(message))
            continue
        settle()
        if isinstance(message, UserMessage):
            out.append(message)
            continue
        content = _assistant_blocks(message, rules, ids)
        if not content:
            continue
        out.append(replace(message, content=content))
        rewritten = [b for b in content if isinstance(b, ToolCall)]
        waiting.extend(zip((c.id for c in message.tool_calls), rewritten, strict=True))
    settle()
    return tuple(out)


def _assistant_blocks(
    message: AssistantMessage, rules: HistoryTarget, ids: _IdMap
) -> tuple[Block, ...]:
    own = provider_of(message) == rules.provider
    blocks: list[Block] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                blocks.append(block)
        elif isinstance(block, ThinkingBlock):
            kept = _thinking(block, rules.thinking, own)
            if kept is not None:
                blocks.append(kept)
        else:
            blocks.append(replace(block, id=ids.rewrite(block.id)))
    return tuple(blocks)


def _thinking(block: ThinkingBlock, policy: ThinkingPolicy, own: bool) -> Block | None:
    if policy == "drop":
        return None
    if own and (policy == "same_provider" or (policy == "signed" and block.signature)):
        return block
    if block.text.strip():
        return TextBlock(text=block.text, phase="commentary")
    return None  # empty or redacted (opaque) reasoning means nothing to another model


def _missing_result(call: ToolCall) -> ToolResultMessage:
    return tool_error_result(call.id, call.name, MISSING_RESULT)


def _orphan_note(result: ToolResultMessage) -> UserMessage:
    status = "error" if result.is_error else "result"
    return UserMessage(
        content=f"[{status} of an earlier {result.name} call (id {result.tool_call_id}), "
        f"whose call is not in this conversation]\n{result.content}"
    )


class _IdMap:
    """Rewrites tool-call ids for a target: deterministic, valid, unique per conversation."""

    def __init__(self, rules: HistoryTarget) -> None:
        self.valid = re.compile(rf"[{rules.id_chars}]+\Z")
        self.bad_char = re.compile(rf"[^{rules.id_chars}]")
        self.max_length = rules.id_max_length
        self.used: set[str] = set()

    def rewrite(self, original: str) -> str:
        new = original
        if not (self.valid.match(original) and len(original) <= self.max_length):
            new = self._derive(original, "")
        counter = 0
        # ids repeat across turns on some servers (`call_0` every time): each call gets its own
        while new in self.used:
            counter += 1
            new = self._derive(original, f"#{counter}")
        self.used.add(new)
        return new

    def _derive(self, original: str, salt: str) -> str:
        digest = hashlib.sha256((original + salt).encode()).hexdigest()[:10]
        stem = self.bad_char.sub("_", original)[: self.max_length - len(digest) - 1]
        return f"{stem}_{digest}" if stem else f"call_{digest}"[: self.max_length]
