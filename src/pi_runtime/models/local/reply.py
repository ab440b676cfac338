"""Reading the embedded model's reply as it streams: a tool call or an answer.

The grammar guarantees the reply is `{"tool": NAME, "arguments": {...}}` or
`{"answer": TEXT}` — unless the output limit cuts it first. `ReplyParser` turns the
growing text into the deltas a streaming provider would send (the answer's text, the
call's name, then its argument text) and, at the end, into a neutral response.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...messages import Block, FinishReason, TextBlock, ToolCall, Usage
from .._deltas import parse_arguments
from ..base import ModelResponse, StreamEvent, TextDelta, ToolCallDelta
from .prompt import ANSWER_KEY, ARGUMENTS_KEY, TOOL_KEY

__all__ = ["ReplyParser"]

_TOOL_HEAD = re.compile(
    rf'\s*\{{\s*"{TOOL_KEY}"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"{ARGUMENTS_KEY}"\s*:\s*'
)
_ANSWER_HEAD = re.compile(rf'\s*\{{\s*"{ANSWER_KEY}"\s*:\s*"')
_STRING_BODY = re.compile(r'(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_TAIL = re.compile(r"[\s}]*\Z")


class ReplyParser:
    """Feeds on the reply's text pieces; `response` gives the finished answer."""

    def __init__(self, *, call_id: str, tool_names: tuple[str, ...] = ()) -> None:
        self.call_id = call_id
        self.tool_names = tool_names
        self.text = ""
        self.name: str | None = None
        self.arguments_at = 0
        self.arguments_sent = 0
        self.answer_at: int | None = None
        self.answer_sent = 0

    def feed(self, piece: str) -> list[StreamEvent]:
        """The deltas `piece` completes."""
        self.text += piece
        events: list[StreamEvent] = []
        if self.name is None and self.answer_at is None:
            head = _TOOL_HEAD.match(self.text)
            if head:
                self.name = json.loads(f'"{head.group(1)}"')
                self.arguments_at = head.end()
                events.append(ToolCallDelta(index=0, id=self.call_id, name=self.name))
            else:
                opening = _ANSWER_HEAD.match(self.text)
                if opening:
                    self.answer_at = opening.end()
        if self.name is not None:
            if self.arguments_sent == 0:  # the head matched before the space after it came
                while self.arguments_at < len(self.text) and self.text[self.arguments_at].isspace():
                    self.arguments_at += 1
            # Hold back a trailing run of `}` and spaces: it may close the whole reply.
            end = _TAIL.search(self.text, self.arguments_at)
            stop = end.start() if end else len(self.text)
            if stop > self.arguments_at + self.arguments_sent:
                events.append(
                    ToolCallDelta(
                        index=0,
                        arguments_delta=self.text[self.arguments_at + self.arguments_sent : stop],
                    )
                )
                self.arguments_sent = stop - self.arguments_at
        elif self.answer_at is not None:
            answer = self._answer_so_far()
            ready = len(answer)
            if answer and "\ud800" <= answer[-1] <= "\udbff":
                # An escaped high surrogate joins the next escape into one character, which
                # would shift what was already sent: it waits for the next piece.
                ready -= 1
            if ready > self.answer_sent:
                events.append(TextDelta(text=answer[self.answer_sent : ready]))
                self.answer_sent = ready
        return events

    def _answer_so_far(self) -> str:
        """The answer's text decoded up to the last complete character."""
        assert self.answer_at is not None
        body = _STRING_BODY.match(self.text, self.answer_at)
        raw = self.text[self.answer_at : body.end() if body else self.answer_at]
        decoded: str = json.loads(f'"{raw}"', strict=False)
        return decoded

    def flush(self, *, cut: bool) -> list[StreamEvent]:
        """The text still held back once the reply has ended."""
        if self.answer_at is not None:
            rest = self._answer_so_far()[self.answer_sent :]
            self.answer_sent += len(rest)
            return [TextDelta(text=rest)] if rest else []
        if self.name is None:
            return []
        rest = self._arguments_text(cut)[self.arguments_sent :]
        self.arguments_sent += len(rest)
        return [ToolCallDelta(index=0, arguments_delta=rest)] if rest else []

    def response(self, *, cut: bool, usage: Usage, model: str) -> ModelResponse:
        """The reply in neutral form. `cut`: the output limit stopped it before its end."""
        content: list[Block] = []
        raw: dict[str, Any] = {"text": self.text, "cut": cut}
        if self.name is not None:
            arguments_text = self._arguments_text(cut)
            content.append(
                ToolCall(
                    id=self.call_id,
                    name=self.name,
                    raw=arguments_text,
                    arguments=parse_arguments(arguments_text),
                    truncated=cut,
                )
            )
        elif self.answer_at is not None:
            content.append(TextBlock(text=self._answer_so_far()))
        elif not cut:
            # The grammar makes this unreachable; a reply that is neither is shown as is.
            content.append(TextBlock(text=self.text.strip()))
        elif self.text.strip():
            content.extend(self._cut_head())
        finish: FinishReason = (
            "length" if cut else ("tool_calls" if self.name is not None else "stop")
        )
        return ModelResponse(
            content=tuple(content), finish_reason=finish, usage=usage, model=model, raw=raw
        )

    def _arguments_text(self, cut: bool) -> str:
        if cut:
            return self.text[self.arguments_at :].rstrip()
        try:
            _, end = json.JSONDecoder().raw_decode(self.text, self.arguments_at)
        except ValueError:
            return self.text[self.arguments_at :].rstrip()
        return self.text[self.arguments_at : end]

    def _cut_head(self) -> list[Block]:
        """A reply cut before its kind was clear: a call to the one tool it can only be."""
        match = re.match(rf'\s*\{{\s*"{TOOL_KEY}"\s*:\s*"([^"\\]*)', self.text)
        if match:
            candidates = [n for n in self.tool_names if n.startswith(match.group(1))]
            if len(candidates) == 1:
                return [ToolCall(id=self.call_id, name=candidates[0], raw="", truncated=True)]
        return []
