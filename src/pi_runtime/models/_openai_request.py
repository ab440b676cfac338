"""Neutral requests to Chat Completions parameters: messages, tools, tool choice, limits."""

from __future__ import annotations

import copy
import json
from typing import Any

from ..messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .base import TOOL_CHOICE_MODES, ModelRequest, OutputFormat, ToolChoice, ToolDefinition
from .history import normalise_history
from .providers import Vendor

__all__ = [
    "chat_messages",
    "chat_params",
    "chat_tool",
    "chat_tool_choice",
    "response_format",
    "strict_schema",
]


def chat_messages(
    system: str, messages: tuple[Message, ...], *, reasoning_field: str | None = None
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages.

    Assistant tool calls keep their ids and tool results answer them by `tool_call_id`.
    Thinking is dropped unless the vendor names a field to send it back in.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, ToolResultMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message, reasoning_field))
    return out


def _assistant(message: AssistantMessage, reasoning_field: str | None) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    # `content` is always a string, "" beside tool calls with no text: OpenAI takes that,
    # and llama-cpp-python's server refuses both a null and a missing `content`.
    entry: dict[str, Any] = {"role": "assistant", "content": text}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": _sendable_arguments(call)},
        }
        for call in message.content
        if isinstance(call, ToolCall)
    ]
    if calls:
        entry["tool_calls"] = calls
    thinking = "".join(b.text for b in message.content if isinstance(b, ThinkingBlock))
    if reasoning_field and thinking:
        entry[reasoning_field] = thinking
    return entry


def _sendable_arguments(call: ToolCall) -> str:
    """The call's argument text, or `{}` when it is not JSON.

    A call cut off by the output limit holds broken JSON; some servers refuse a history
    carrying it. Its tool result (`truncated_call`) already tells the model what happened.
    """
    if call.arguments is not None:
        return call.raw
    try:
        json.loads(call.raw)
    except ValueError:
        return "{}"
    return call.raw


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` in the form strict tools require, or None when that would change its meaning.

    Strict mode wants every object closed and every property required. An optional
    property that accepts null can be required without changing what the tool receives
    (the model sends null where it would have left the key out); any other optional
    property cannot, and the tool is then sent non-strict.
    """
    converted = copy.deepcopy(schema)
    return converted if _make_strict(converted) else None


def _make_strict(node: Any) -> bool:
    if not isinstance(node, dict):
        return True
    node.pop("default", None)
    properties = node.get("properties")
    if isinstance(properties, dict):
        if node.get("additionalProperties") is not False:
            return False
        required = list(node.get("required", []))
        for name, sub in properties.items():
            if name not in required:
                if not _accepts_null(sub):
                    return False
                required.append(name)
        node["required"] = required
    return all(_make_strict(sub) for sub in _subschemas(node))


def _subschemas(node: dict[str, Any]) -> list[Any]:
    subs: list[Any] = []
    for key in ("properties", "$defs", "definitions"):
        if isinstance(node.get(key), dict):
            subs.extend(node[key].values())
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            subs.extend(node[key])
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            subs.append(node[key])
    return subs


def _accepts_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(s) for s in schema.get("anyOf", []) + schema.get("oneOf", []))


def chat_tool(definition: ToolDefinition, *, strict: bool) -> dict[str, Any]:
    """One function tool; strict when asked for and the schema allows it."""
    function: dict[str, Any] = {
        "name": definition.name,
        "description": definition.description,
        "parameters": definition.parameters,
    }
    converted = strict_schema(definition.parameters) if strict else None
    if converted is not None:
        function["parameters"] = converted
        function["strict"] = True
    return {"type": "function", "function": function}


def chat_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    """`auto`/`required`/`none` as they are; a tool name as a named function choice."""
    if choice in TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format(output: OutputFormat, vendor: Vendor) -> dict[str, Any]:
    """An output contract as Chat Completions structured output."""
    if vendor.structured_output == "json_object":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
    }


def chat_params(request: ModelRequest, *, model: str, vendor: Vendor) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` for one streamed call."""
    params: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(
            request.system,
            normalise_history(request.messages, target=vendor.name),
            reasoning_field=vendor.reasoning_field,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [chat_tool(d, strict=vendor.strict_tools) for d in request.tools]
        params["tool_choice"] = chat_tool_choice(request.tool_choice)
        if vendor.parallel_tool_calls and request.tool_choice != "none":
            params["parallel_tool_calls"] = True
    if request.output is not None:
        params["response_format"] = response_format(request.output, vendor)
    settings = request.settings
    if settings.max_tokens is not None:
        params[vendor.max_tokens_field] = settings.max_tokens
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    return params
