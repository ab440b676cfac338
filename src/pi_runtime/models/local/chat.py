"""An instruction-tuned GGUF in its own chat format: its template, its tool-call tags.

A model trained on a chat template reads the conversation best in that template and
writes tool calls in the form it was taught — for Qwen2.5,

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "北京"}}
    </tool_call>

So when the GGUF carries `tokenizer.chat_template`, the prompt is that template rendered
(in a sandbox: the template comes from a file) and decoding is constrained to exactly one
such call, with arguments valid for the tool, or to a plain-text answer.

Text from outside — the user's, a tool's, the model's own earlier replies — never becomes
a control token: each occurrence of a special token's spelling in it is broken with a
zero-width space before the prompt is tokenized with specials on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
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

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "MAX_CALLS",
    "answer_messages",
    "call_schema",
    "chat_grammar",
    "defang",
    "json_answer_rules",
    "render_chat",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_BREAK = "\u200b"
_RUNTIME_BLOCK = re.compile(r"\A\[runtime\].*?\[/runtime\]\s*", re.S)
"""The context builder's runtime block at the head of a user request (`context.prompt`)."""
MAX_CALLS = 3
"""Calls one reply may make: a small model restates its earlier calls before a new one."""


def defang(text: str, specials: Sequence[str]) -> str:
    """`text` with every spelling of a special token broken after its first character."""
    for special in specials:
        if special in text:
            text = text.replace(special, special[0] + _BREAK + special[1:])
    return text


def _defang_all(value: Any, specials: Sequence[str]) -> Any:
    if isinstance(value, str):
        return defang(value, specials)
    if isinstance(value, list):
        return [_defang_all(v, specials) for v in value]
    if isinstance(value, dict):  # keys too: argument names come from the model
        return {_defang_all(k, specials): _defang_all(v, specials) for k, v in value.items()}
    return value


def render_chat(
    template: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    *,
    specials: Sequence[str] = (),
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """The prompt up to where the assistant writes its next reply, in the model's format."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    # Chinese stays Chinese: jinja's own tojson escapes every non-ASCII character.
    environment.filters["tojson"] = lambda v, indent=None: json.dumps(
        v, ensure_ascii=False, indent=indent
    )
    chat = [{"role": "system", "content": system}] if system.strip() else []
    chat.extend(_chat_message(m) for m in messages)
    functions = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]
    try:
        rendered: str = environment.from_string(template).render(
            messages=_defang_all(chat, specials),
            tools=_defang_all(functions, specials) or None,
            add_generation_prompt=True,
            bos_token=bos_token,
            eos_token=eos_token,
            raise_exception=raise_exception,
        )
    except Exception as exc:  # jinja's errors, and Python's raised by the template's code
        raise ModelError(f"the local model's chat template failed: {exc}") from exc
    return rendered


def answer_messages(messages: Sequence[Message]) -> list[Message]:
    """The conversation as one user turn: the user's request, then what the tools said.

    After its tool calls, a small model answers better from this than from the chat
    itself, where it keeps restating calls: it reads the request and the results and
    writes the reply.
    """
    start = max(
        (i for i, m in enumerate(messages) if isinstance(m, UserMessage) and m.origin == "user"),
        default=0,
    )
    earlier, request = list(messages[:start]), messages[start:]
    calls = {
        b.id: b
        for m in request
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ToolCall)
    }
    lines = []
    for message in request:
        if isinstance(message, ToolResultMessage):
            call = calls.get(message.tool_call_id)
            arguments = json.dumps(call.arguments if call is not None else None, ensure_ascii=False)
            lines.append(f"{message.name}({arguments}) → {message.content}")
    question = request[0].content if request and isinstance(request[0], UserMessage) else ""
    question = _RUNTIME_BLOCK.sub("", question)  # the date and tool list were for calling
    text = f"{question}\n\nTool results:\n" + "\n".join(lines) if lines else question
    return [*earlier, UserMessage(content=text)]


def _chat_message(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "name": message.name, "content": message.content}
    if isinstance(message, AssistantMessage):
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        calls = [
            {
                "type": "function",
                "function": {
                    "name": b.name,
                    "arguments": b.arguments if isinstance(b.arguments, dict) else {},
                },
            }
            for b in message.content
            if isinstance(b, ToolCall)
        ]
        entry: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            entry["tool_calls"] = calls
        return entry
    return {"role": "user", "content": message.content}


def chat_grammar(
    call_grammar: str,
    tools: Sequence[ToolDefinition],
    choice: ToolChoice,
    *,
    one_paragraph: bool = False,
    json_answer: bool = False,
) -> str:
    """The reply grammar: tool calls (their JSON from `call_grammar`) or an answer.

    `call_grammar` is a GBNF grammar whose root is a call's JSON object. A call may
    come in the tags the template teaches, in a JSON code fence, or bare: small models
    write all three, and each means the same call. `auto` allows calls or an answer,
    `required` and a tool name only calls, `none` only an answer. An answer starts with
    a letter (of any script), so it is never a call gone wrong, and has no blank line;
    `one_paragraph` ends it at its first line break.

    `json_answer`: the answer is the output contract's JSON object, and `call_grammar`
    (from `json_answer_rules`) already defines both `call-json` and `answer-json`; a
    call then needs its tags or a fence, since a bare object is the answer.
    """
    if choice not in ("auto", "required", "none") and all(t.name != choice for t in tools):
        raise ModelError(f"tool choice {choice!r} names a tool that is not offered")
    bare = "" if json_answer else " | call-json"
    forms = (
        f'call ::= "{CALL_OPEN}\\n" call-json "\\n{CALL_CLOSE}" '
        f'| "```json\\n" call-json "\\n```"{bare}\n'
        + "calls ::= call"
        + ' ("\\n" call' * (MAX_CALLS - 1)
        + ")?" * (MAX_CALLS - 1)
    )
    # Without blank lines: a small coder model drifts into code after a blank line.
    rest = "[^\\x00\\n]*" if one_paragraph else '[^\\x00\\n]* ("\\n" [^\\x00\\n]+)*'
    answer = (
        "answer ::= answer-json"
        if json_answer
        else f"answer ::= [a-zA-Z\\u0080-\\U0010FFFF] {rest}"
    )
    if choice == "none" or not tools:
        rules = call_grammar if json_answer else ""
        return f"root ::= answer\n{answer}\n{rules}"
    body = call_grammar if json_answer else _rename_root(call_grammar, "call-json")
    root = "root ::= calls | answer" if choice == "auto" else "root ::= calls"
    return f"{root}\n{forms}\n{answer}\n{body}"


def json_answer_rules(reply_grammar: str, *, with_calls: bool) -> str:
    """Rules naming `call-json` and `answer-json` in a grammar converted from the schema
    `{"oneOf": [calls, answer]}` (`with_calls`) or from the answer's schema alone.

    Converted together, the two share helper rules (`string`, `space`) without clashing;
    the converter names the branches `alternative-0` and `alternative-1`.
    """
    rules = reply_grammar.rstrip("\n") + "\n"
    if not with_calls:
        return _rename_root(rules, "answer-json")
    return (
        _rename_root(rules, "reply-json")
        + "call-json ::= alternative-0\nanswer-json ::= alternative-1\n"
    )


def _rename_root(grammar: str, name: str) -> str:
    renamed, count = re.subn(r"^root ::=", f"{name} ::=", grammar, count=1, flags=re.M)
    if count != 1:
        raise ModelError("the call grammar built from the tool schemas has no root rule")
    return renamed


def call_schema(tools: Iterable[ToolDefinition]) -> dict[str, Any]:
    """The JSON Schema of the object inside the call tags, one branch per tool."""
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": t.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return branches[0] if len(branches) == 1 else {"oneOf": branches}
