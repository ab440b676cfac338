"""Message content as the GenAI conventions record it (opt-in only), secrets redacted.

The conventions' JSON schemas for `gen_ai.input.messages`, `gen_ai.output.messages` and
`gen_ai.system_instructions`: a message is `{"role", "parts"}`, a part `{"type": "text" |
"reasoning" | "tool_call" | "tool_call_response", …}`. Every string goes through
`messages.redact` first: content capture is for reading what the model read, never for
leaking the keys a tool or a provider echoed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    redact,
)

OUTPUT_FINISH = {"stop": "stop", "tool_calls": "tool_call", "length": "length"}
"""Pi's finish reasons as the output-messages schema spells them."""


def clean(value: Any) -> Any:
    """`value` with every string in it redacted (JSON shapes kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def system_instructions(system: str) -> str:
    return dumps([{"type": "text", "content": redact(system)}])


def input_messages(messages: Iterable[Message], limit: int) -> str:
    """The conversation's latest messages that fit in `limit` characters (often all of
    them), as one JSON array: each `chat` span would otherwise carry the whole conversation
    again, however long. The latest alone when even it does not fit (the span cuts it)."""
    kept: list[str] = []
    size = 2  # the brackets
    for message in reversed(list(messages)):
        item = dumps(_message(message))
        if kept and size + len(item) + 2 > limit:
            break
        kept.append(item)
        size += len(item) + 2
    return "[" + ", ".join(reversed(kept)) + "]"


def output_messages(message: AssistantMessage) -> str:
    return dumps(
        [
            {
                **_message(message),
                "finish_reason": OUTPUT_FINISH.get(message.finish_reason, message.finish_reason),
            }
        ]
    )


def tool_arguments(call: ToolCall) -> str:
    if call.arguments is not None:
        return dumps(clean(call.arguments))
    return redact(call.raw)  # not a JSON object (malformed, cut off): the text as written


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        part = {
            "type": "tool_call_response",
            "id": message.tool_call_id,
            "result": redact(message.content),
        }
        return {"role": "tool", "parts": [part]}
    if isinstance(message, AssistantMessage):
        return {"role": "assistant", "parts": [_part(b) for b in message.content]}
    return {"role": "user", "parts": [{"type": "text", "content": redact(message.content)}]}


def _part(block: TextBlock | ThinkingBlock | ToolCall) -> dict[str, Any]:
    if isinstance(block, ToolCall):
        arguments: Any = (
            clean(block.arguments) if block.arguments is not None else redact(block.raw)
        )
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": arguments}
    if isinstance(block, ThinkingBlock):
        return {"type": "reasoning", "content": redact(block.text)}
    return {"type": "text", "content": redact(block.text)}
