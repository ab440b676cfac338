"""Chat Completions stream chunks, folded into deltas as they come and one response at the end.

A chunk is read as the JSON it came as (`_malformed.plain`), and each field is checked
before it is used (see `StreamAccumulator`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ModelError
from ..messages import Block, FinishReason, TextBlock, ThinkingBlock, ToolCall, Usage, token_figure
from ._deltas import AnswerSize, parse_arguments
from ._malformed import malformed, plain, wrong
from .base import ModelResponse, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta

__all__ = ["StreamAccumulator", "reached_output_limit"]


@dataclass(slots=True)
class _PartialCall:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    whole: bool = False  # the arguments came as one JSON object, not as text


_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


class StreamAccumulator:
    """Folds Chat Completions chunks into deltas as they come and one response at the end.

    A field of the wrong shape ends the call with an error naming it. Some readings are
    plain and safe, and taken: `choices` or a `delta` that is null carries nothing (a
    server's usage-only chunk, Azure's content filter); `content` given as a list of parts
    is the text of its text parts; a call's `arguments` given as one JSON object are that
    object's JSON; usage of another shape is none reported (the run counts the tokens).
    """

    def __init__(self, *, turn: int, vendor: str = "openai", provider: str = "") -> None:
        self.turn = turn
        self.vendor = vendor
        self.provider = provider or vendor  # who the errors name: `Vendor.display`
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.delta_chunks = 0
        self.size = AnswerSize(self.provider)

    def add(self, chunk: object) -> list[StreamEvent]:
        """The deltas one chunk (the SDK's `ChatCompletionChunk`, or its JSON) carries."""
        data = plain(chunk)
        if not isinstance(data, dict):
            raise wrong(self.provider, "a chunk of the stream", data, "an object")
        for key in ("id", "model", "created", "system_fingerprint"):
            value = data.get(key)
            if isinstance(value, str | int):
                self.meta.setdefault(key, value)
        usage = data.get("usage")
        if isinstance(usage, dict):  # usage of another shape is none: the run counts it
            self.usage = {k: v for k, v in usage.items() if v is not None}
        choices = data.get("choices")
        if choices is None:  # the usage-only chunk's are [], some servers' null
            return []
        if not isinstance(choices, list):
            raise wrong(self.provider, "the chunk's choices", choices, "a list")
        events: list[StreamEvent] = []
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise wrong(self.provider, f"choice {position}", choice, "an object")
            index = choice.get("index")
            if isinstance(index, int) and index != 0:
                continue  # Pi never asks for n > 1: a choice without a number is the one
            delta = choice.get("delta")
            if delta is not None:  # Azure's content filter sends choices without one
                if not isinstance(delta, dict):
                    raise wrong(self.provider, "choice 0's delta", delta, "an object")
                before = len(events)
                events.extend(self._delta(delta))
                if len(events) > before:
                    self.delta_chunks += 1
            finish = choice.get("finish_reason")
            if finish is not None:  # one of another type still ends the answer (as `stop`)
                self.finish = finish if isinstance(finish, str) else json.dumps(finish)
        return events

    def _delta(self, delta: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        # DeepSeek and vLLM call it reasoning_content, OpenRouter reasoning.
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(self.size.add(reasoning))
            events.append(ThinkingDelta(text=reasoning))
        content = self._content(delta.get("content"))
        if content:
            self.text.append(self.size.add(content))
            events.append(TextDelta(text=content))
        pieces = delta.get("tool_calls")
        if pieces is not None and not isinstance(pieces, list):
            raise wrong(self.provider, "the delta's tool_calls", pieces, "a list")
        for position, piece in enumerate(pieces or ()):
            if not isinstance(piece, dict):
                raise wrong(self.provider, f"tool call piece {position}", piece, "an object")
            index = piece.get("index")
            if not isinstance(index, int):  # some servers send whole calls, unnumbered
                last = max(self.calls, default=-1)
                index = last + 1 if piece.get("id") or last < 0 else last
            events.extend(self._tool_piece(index, piece))
        return events

    def _content(self, content: object) -> str:
        if content is None or isinstance(content, str):
            return content or ""
        if isinstance(content, list):  # parts, as some servers send it (Mistral's): the text
            return "".join(_text_of(part) for part in content)
        raise wrong(self.provider, "choice 0's content", content, "a string")

    def _tool_piece(self, index: int, piece: dict[str, Any]) -> list[StreamEvent]:
        call_id, function = piece.get("id"), piece.get("function") or {}
        if call_id is not None and not isinstance(call_id, str):
            raise wrong(self.provider, f"tool call {index}'s id", call_id, "a string")
        if not isinstance(function, dict):
            raise wrong(self.provider, f"tool call {index}'s function", function, "an object")
        name, arguments = function.get("name"), function.get("arguments")
        if name is not None and not isinstance(name, str):
            raise wrong(self.provider, f"tool call {index}'s name", name, "a string")
        if arguments is not None and not isinstance(arguments, str | dict):
            where = f"tool call {index}'s arguments"
            raise wrong(self.provider, where, arguments, "a JSON string", verb="are")
        name = name or ""
        events: list[StreamEvent] = []
        call = self.calls.get(index)
        if call is None:
            # Some servers send no id; the conversation still needs one to pair results.
            call = self.calls[index] = _PartialCall(id=call_id or f"call_{self.turn}_{index}")
            call.name = name
            events.append(ToolCallDelta(index=index, id=call.id, name=name))
        elif name and name != call.name:
            call.name += name
        if isinstance(arguments, dict) and not call.arguments:
            # one object, as some servers send it: its JSON is the text of the arguments
            arguments, call.whole = json.dumps(arguments, ensure_ascii=False), True
        elif isinstance(arguments, dict) or (arguments and call.whole):
            what = f"tool call {index}'s arguments come both as an object and as text"
            raise malformed(self.provider, what)
        if arguments:
            call.arguments.append(self.size.add(arguments))
            events.append(ToolCallDelta(index=index, arguments_delta=arguments))
        return events

    def response(self, *, max_tokens: int | None) -> ModelResponse:
        """The whole answer in neutral form, with the truncation rule applied."""
        if self.finish is None:
            raise ModelError(
                f"{self.provider} ended the stream before the answer was finished",
                transient=True,
            )
        calls = [
            ToolCall(
                id=c.id,
                name=c.name,
                raw="".join(c.arguments),
                arguments=parse_arguments("".join(c.arguments)),
            )
            for _, c in sorted(self.calls.items())
        ]
        usage = _usage(self.usage, self.delta_chunks)
        cut = reached_output_limit(self.finish, calls, usage, max_tokens)
        nameless = [i for i, c in sorted(self.calls.items()) if not c.name]
        if nameless and not cut:  # a call cut short is refused as such (`truncated`)
            raise malformed(self.provider, f"tool call {nameless[0]} has no name")
        finish: FinishReason = "length" if cut else _FINISH.get(self.finish, "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        content: list[Block] = []
        if self.reasoning:
            content.append(ThinkingBlock(text="".join(self.reasoning)))
        if self.text:
            content.append(
                TextBlock(text="".join(self.text), phase="commentary" if calls else "final")
            )
        content.extend(
            ToolCall(id=c.id, name=c.name, raw=c.raw, arguments=c.arguments, truncated=cut)
            for c in calls
        )
        return ModelResponse(
            content=tuple(content),
            finish_reason=finish,
            usage=usage,
            # The vendor prefix tells a later request who wrote this message (history.py).
            model=f"{self.vendor}:{self.meta.get('model') or 'unknown'}",
            raw=self._raw(calls),
        )

    def _raw(self, calls: list[ToolCall]) -> dict[str, Any]:
        """The streamed answer folded back into the shape of a non-streamed completion."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
                for c in calls
            ]
        raw: dict[str, Any] = {
            **self.meta,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.usage is not None:
            raw["usage"] = self.usage
        jsonable: dict[str, Any] = json.loads(json.dumps(raw, default=str))
        return jsonable


def _text_of(part: object) -> str:
    """The text of one part of a content list: a string, or a `{"type": "text"}` part."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict) or part.get("type") != "text":
        return ""  # an image, a reference: not text the model wrote
    text = part.get("text")
    return text if isinstance(text, str) else ""


def reached_output_limit(
    finish: str | None, calls: list[ToolCall], usage: Usage, max_tokens: int | None
) -> bool:
    """Whether the answer was cut off by the output limit, whatever the server says.

    `length` says so. So does an answer that used all of `max_tokens` while a call's
    arguments don't parse: llama-cpp-python's server reports `tool_calls` for a call cut
    off mid-string at `max_tokens=5`.
    """
    if finish == "length":
        return True
    used_all = max_tokens is not None and usage.output_tokens >= max_tokens
    return used_all and any(c.arguments is None for c in calls)


def _usage(usage: dict[str, Any] | None, delta_chunks: int) -> Usage:
    """The usage the server reported, else what the stream shows of it.

    Some servers send no usage when streaming (llama-cpp-python's ignores
    `stream_options`). Every chunk carrying text or arguments holds at least one token, so
    the count of such chunks is a lower bound of the output — enough to tell that an
    answer used all of `max_tokens`. The input stays unknown (0); `raw` has no `usage`.
    """
    if not usage:
        return Usage(output_tokens=delta_chunks)
    details = usage.get("prompt_tokens_details")
    return Usage(
        input_tokens=token_figure(usage.get("prompt_tokens")),
        output_tokens=token_figure(usage.get("completion_tokens")),
        cached_tokens=token_figure(details.get("cached_tokens"))
        if isinstance(details, dict)
        else 0,
    )
