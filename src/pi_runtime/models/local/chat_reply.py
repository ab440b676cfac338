"""Reading a reply in the chat format: tool calls or plain text.

The grammar (`chat.chat_grammar`) allows up to `MAX_CALLS` calls `{"name": N,
"arguments": {...}}` — each bare, in `<tool_call>` tags or in a JSON code fence — or an
answer starting with a letter; the output limit may cut either. An answer streams as it
comes; calls are read when the reply is whole, because the adapter may still drop
some (`answered_calls`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ...messages import (
    AssistantMessage,
    Block,
    FinishReason,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ...messages.canonical import action_hash
from .._deltas import parse_arguments
from ..base import ModelResponse, StreamEvent, TextDelta
from .chat import CALL_OPEN

__all__ = ["ChatReplyParser", "answered_calls", "call_key"]

_CALL_STARTS = (CALL_OPEN, "```", "{")
_HEAD = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


class ChatReplyParser:
    """Feeds on the reply's text pieces; `response` gives the finished reply."""

    def __init__(
        self, *, call_id: str, tool_names: tuple[str, ...] = (), json_answer: bool = False
    ) -> None:
        self.call_id = call_id
        # With a JSON answer, a bare object is the answer: calls come tagged or fenced.
        self.call_starts = _CALL_STARTS[:2] if json_answer else _CALL_STARTS
        self.tool_names = tool_names
        self.text = ""
        self.kind: str | None = None  # "call" or "answer", once the start tells
        self.sent = 0

    def feed(self, piece: str) -> list[StreamEvent]:
        """The answer's text that `piece` completes (calls wait for the whole reply)."""
        self.text += piece
        if self.kind is None:
            start = self.text.lstrip()
            if start.startswith(self.call_starts):
                self.kind = "call"
            elif start and not any(s.startswith(start) for s in self.call_starts):
                self.kind = "answer"
        return self.flush(cut=False) if self.kind == "answer" else []

    def flush(self, *, cut: bool) -> list[StreamEvent]:
        """The answer's text still held back once the reply has ended."""
        if self.kind == "call":
            return []
        rest = self.text[self.sent :]
        self.sent = len(self.text)
        return [TextDelta(text=rest)] if rest else []

    def calls(self, *, cut: bool) -> list[ToolCall]:
        """The reply's calls in order; the last is marked truncated when the limit cut it."""
        if self.kind != "call":
            return []
        found: list[ToolCall] = []
        position = 0
        while head := _HEAD.search(self.text, position):
            start = head.end()
            try:
                _, end = json.JSONDecoder().raw_decode(self.text, start)
            except ValueError:  # only the output limit leaves a call unfinished
                raw = _PARTIAL_END.sub("", self.text[start:]).strip()
                found.append(self._call(len(found), head.group(1), raw, truncated=True))
                break
            found.append(self._call(len(found), head.group(1), self.text[start:end]))
            position = end
        if cut and not found:
            found.extend(self._cut_head())
        return found

    def _call(self, index: int, name: str, raw: str, *, truncated: bool = False) -> ToolCall:
        call_id = self.call_id if index == 0 else f"{self.call_id}_{index}"
        arguments = None if truncated else parse_arguments(raw)
        return ToolCall(
            id=call_id, name=_json_string(name), raw=raw, arguments=arguments, truncated=truncated
        )

    def response(
        self, *, cut: bool, usage: Any, model: str, calls: Sequence[ToolCall] | None = None
    ) -> ModelResponse:
        """The reply in neutral form: `calls` (default: all the reply's calls), or the answer.

        `cut`: the output limit stopped it before its end.
        """
        content: list[Block] = list(self.calls(cut=cut) if calls is None else calls)
        if self.kind != "call" and self.text.strip():
            content.append(TextBlock(text=self.text.strip()))
        raw: dict[str, Any] = {"text": self.text, "cut": cut}
        has_calls = any(isinstance(b, ToolCall) for b in content)
        finish: FinishReason = "length" if cut else ("tool_calls" if has_calls else "stop")
        return ModelResponse(
            content=tuple(content), finish_reason=finish, usage=usage, model=model, raw=raw
        )

    def _cut_head(self) -> list[ToolCall]:
        """A call cut before its name was whole: the one tool it can only be, if any."""
        match = re.search(r'"name"\s*:\s*"([^"\\]*)', self.text)
        if match:
            candidates = [n for n in self.tool_names if n.startswith(match.group(1))]
            if len(candidates) == 1:
                return [ToolCall(id=self.call_id, name=candidates[0], raw="", truncated=True)]
        return []


_PARTIAL_END = re.compile(r"\s*(?:<[/a-z_]*>?|`{1,3})\Z")


def answered_calls(messages: Sequence[Message]) -> set[str]:
    """Canonical forms of the calls answered without error since the user last spoke.

    A small model restates the calls it already made before writing its next one; those
    restatements are not new calls.
    """
    answered: set[str] = set()
    pending: dict[str, str] = {}
    for message in messages:
        if isinstance(message, UserMessage) and message.origin == "user":
            answered.clear()
            pending.clear()
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolCall) and block.arguments is not None:
                    pending[block.id] = call_key(block)
        elif isinstance(message, ToolResultMessage) and not message.is_error:
            key = pending.pop(message.tool_call_id, None)
            if key is not None:
                answered.add(key)
    return answered


def call_key(call: ToolCall) -> str:
    """A call's name and canonical arguments: equal for calls that mean the same."""
    return action_hash(call.name, call.arguments, call.raw)


def _json_string(body: str) -> str:
    try:
        value = json.loads(f'"{body}"')
    except ValueError:
        return body
    return value if isinstance(value, str) else body
