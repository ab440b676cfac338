"""What the embedded base model reads and may write: a transcript and a reply schema.

A base model continues text; it was never taught a chat or tool-calling format. So the
conversation is laid out as a plain transcript whose assistant lines are single JSON
objects, and decoding is constrained by a grammar built from `reply_schema`: the model
can only write `{"tool": NAME, "arguments": {...}}` with arguments valid for that tool,
or `{"answer": TEXT}`.

    <system prompt>

    Tools:
    - get_weather: <description>
      arguments: <JSON Schema>

    <format rules>

    User: 北京明天天气怎么样？
    Assistant: {"tool": "get_weather", "arguments": {"city": "北京"}}
    Result of get_weather: {"city": "北京", "sky": "小雨"}
    Assistant:
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from ...exceptions import ModelError
from ...messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ..base import ToolChoice, ToolDefinition

__all__ = ["ANSWER_KEY", "ARGUMENTS_KEY", "TOOL_KEY", "render_prompt", "reply_schema"]

TOOL_KEY = "tool"
ARGUMENTS_KEY = "arguments"
ANSWER_KEY = "answer"

USER_PREFIX = "User: "
ASSISTANT_PREFIX = "Assistant:"
RESULT_PREFIX = "Result of {name}: "

FORMAT_RULES = """\
Each Assistant line is one JSON object:
- {"tool": "<tool name>", "arguments": {...}} calls a tool. Its result comes back on the next "Result of <tool name>:" line.
- {"answer": "<reply to the user>"} answers the user when the task is done or needs no tool.
Call one tool at a time. Answer in the user's language, using the results."""

_MAX_REF_DEPTH = 8


def reply_schema(tools: Sequence[ToolDefinition], choice: ToolChoice) -> dict[str, Any]:
    """The JSON Schema every reply must match, honouring the tool choice.

    `auto` allows any tool or an answer; `required` any tool; `none` only an answer; a
    tool name only that tool. Without tools, only an answer.
    """
    if choice in ("auto", "required", "none"):
        offered = [] if choice == "none" else list(tools)
    else:
        offered = [t for t in tools if t.name == choice]
        if not offered:
            raise ModelError(f"tool choice {choice!r} names a tool that is not offered")
    branches = [_call_branch(t) for t in offered]
    if choice in ("auto", "none") or not branches:
        branches.append(_object({ANSWER_KEY: {"type": "string"}}))
    return branches[0] if len(branches) == 1 else {"oneOf": branches}


def _call_branch(tool: ToolDefinition) -> dict[str, Any]:
    return _object({TOOL_KEY: {"const": tool.name}, ARGUMENTS_KEY: inline_refs(tool.parameters)})


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with local `$ref`s replaced by their definitions.

    A tool's schema is nested under `arguments` in the reply schema, where its own
    `#/$defs/...` references would no longer resolve. Recursive definitions are cut at
    a fixed depth (below it, any JSON value is accepted; the gate still validates).
    """
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [resolve(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            target = definitions.get(ref.rsplit("/", 1)[-1])
            if target is None or depth >= _MAX_REF_DEPTH:
                return {}
            merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
            return resolve(merged, depth + 1)
        return {k: resolve(v, depth) for k, v in node.items() if k not in ("$defs", "definitions")}

    resolved: dict[str, Any] = resolve(schema, 0)
    return resolved


def render_prompt(system: str, messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
    """The transcript up to the point where the model writes its next reply."""
    parts = [system.strip()] if system.strip() else []
    if tools:
        parts.append("Tools:\n" + "\n".join(_tool_line(t) for t in tools))
    parts.append(FORMAT_RULES)
    lines = [_line(m) for m in messages]
    lines.append(ASSISTANT_PREFIX)
    return "\n\n".join(parts) + "\n\n" + "\n".join(line for line in lines if line)


def _tool_line(tool: ToolDefinition) -> str:
    description = " ".join(tool.description.split())
    schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(", ", ": "))
    return f"- {tool.name}: {description}\n  arguments: {schema}"


def _line(message: Message) -> str:
    if isinstance(message, UserMessage):
        return USER_PREFIX + _one_line(message.content)
    if isinstance(message, ToolResultMessage):
        # Naming the tool beside its result helped the tiny model move on to the next step.
        return RESULT_PREFIX.format(name=message.name) + _one_line(message.content)
    return "\n".join(_assistant_lines(message))


def _assistant_lines(message: AssistantMessage) -> list[str]:
    """One line per tool call, or the answer; commentary and thinking have no line."""
    lines = []
    for block in message.content:
        if isinstance(block, ToolCall):
            arguments: Any = block.arguments if block.arguments is not None else {}
            reply = {TOOL_KEY: block.name, ARGUMENTS_KEY: arguments}
            lines.append(f"{ASSISTANT_PREFIX} {json.dumps(reply, ensure_ascii=False)}")
    if not lines:
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        answer = json.dumps({ANSWER_KEY: text}, ensure_ascii=False)
        lines.append(f"{ASSISTANT_PREFIX} {answer}")
    return lines


def _one_line(text: str) -> str:
    """Text on one transcript line: the model must not mistake a line break for a turn."""
    return " ".join(text.split("\n")).strip()
