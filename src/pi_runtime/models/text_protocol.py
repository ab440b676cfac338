"""`TextProtocolModel`: tool calling for models that only write text (seed 001 §4.5).

The wrapper tells the inner model about the tools in its system prompt, asks it to write
tool calls as tagged JSON, and reads its answer back into Pi's neutral blocks. The inner
model gets `tools=()` and tool choice `none`; it never needs native tool calling.

The protocol (a wire format: the tags and keys below are fixed)::

    <scratchpad>private reasoning</scratchpad>
    <action>{"tool": "get_weather", "arguments": {"city": "Paris"}}</action>
    <observation tool="get_weather" id="text_0_0">{"temp_c": 21}</observation>
    <observation tool="lookup" id="text_1_0" error="invalid_arguments">{…}</observation>

- The model writes `<scratchpad>` and `<action>`; the runtime writes `<observation>`, as
  the user side of the next turn, one per tool result (`error` holds the error kind).
- A scratchpad becomes a `ThinkingBlock`: it stays in the trace and is never sent back,
  nor shown as text. Text outside tags is the answer (phase `final`) when the message has
  no action, commentary otherwise.
- Each action becomes a `ToolCall` with id `text_{turn}_{i}`. Its `raw` is the text of
  `arguments` exactly as written, so the gate checks what the model wrote.
- Earlier turns are shown back to the model the same way: its text and actions as the
  assistant turn, observations as the user turn (consecutive user-side messages are
  joined, because many chat templates require turns to alternate).
- A tool choice other than `auto` is an instruction at the end of the last user-side
  message, not in the system prompt, so the system prompt stays the same every turn and
  provider prompt caches keep hitting.

Tolerated, deliberately, and nothing beyond:

1. Whitespace around the JSON, and a Markdown code fence (```` ```json … ``` ````) inside
   `<action>`: models trained on chat write JSON in fences by habit.
2. `"name"` for `"tool"`: the OpenAI function-call shape `{"name", "arguments"}` is what
   most models learnt; `"tool"` is canonical because it cannot be mistaken for an
   argument. Both at once is an error.
3. A missing `"arguments"` means `{}` (a tool without parameters).
4. A missing `</action>` at the very end: a model stopped by a stop sequence loses the
   closing tag. If the output hit the length limit instead, the call is `truncated` and
   the gate refuses it (`truncated_call`); closed actions before it stand.
5. `<observation` written by the model ends its turn: what follows is invented, so it
   is left out of the message (the raw text stays in the trace).

Everything else is an error the model hears about, never a dropped call: broken JSON
keeps its text as `raw` and the tool it names (via `"tool": "NAME"`), so the gate answers
`invalid_arguments`; JSON that is not an action (unknown keys, no tool) becomes a call
with an empty name, answered `unknown_tool`, and its observation says what was wrong.
Tags are lowercase and exact; a JSON string may write `</action>` as `<\\/action>`.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator, Sequence

from ..messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._repair import repair_response, repairs_text
from ._text_actions import Splitter, action_problem, call_id, read_action, read_text, to_blocks
from .base import (
    Model,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolDefinition,
    context_window_of,
)

PROTOCOL_RULES = """\
## Tools

You call tools by writing actions. The runtime runs them and answers with observations.

- Think privately inside <scratchpad>…</scratchpad> when it helps; the user never sees it.
- Call a tool with one action: <action>{"tool": "TOOL_NAME", "arguments": {…}}</action>
  "arguments" is one JSON object that matches the tool's schema below.
- You may write several actions; they may run in any order, so put a call that needs
  another call's result in a later answer.
- After your actions, stop. The results come in the next message as
  <observation tool="TOOL_NAME" id="CALL_ID">…</observation>. Never write one yourself.
- An observation with an error attribute says what was wrong: fix the call, don't repeat it.
- When you can answer, write the answer as plain text, with no action."""


def render_tools(tools: Sequence[ToolDefinition]) -> str:
    """The tool list of the prompt: name, description and argument schema of each."""
    if not tools:
        return "Available tools: none."
    parts = ["Available tools:"]
    for t in tools:
        schema = json.dumps(t.parameters, ensure_ascii=False, separators=(",", ":"))
        parts.append(f"### {t.name}\n{t.description.strip()}\nArguments schema: {schema}")
    return "\n\n".join(parts)


def choice_instruction(choice: str) -> str | None:
    """What the model is told this turn for a tool choice; None for `auto`."""
    if choice == "auto":
        return None
    if choice == "required":
        return "This turn, answer with at least one <action>."
    if choice == "none":
        return "This turn, answer in plain text, without any <action>."
    return f'This turn, answer with an <action> that calls the tool "{choice}".'


def render_call(call: ToolCall) -> str:
    """A tool call as the action text that stands for it."""
    if call.name:
        try:
            json.loads(call.raw)
        except (ValueError, RecursionError):
            return call.raw  # broken JSON is shown as written, so the model can fix it
        name = json.dumps(call.name, ensure_ascii=False)
        return f'{{"tool": {name}, "arguments": {call.raw}}}'
    return call.raw


def render_observation(result: ToolResultMessage, call: ToolCall | None) -> str:
    attrs = f'tool="{html.escape(result.name)}" id="{html.escape(result.tool_call_id)}"'
    if result.is_error:
        attrs += f' error="{html.escape(result.error.kind if result.error else "error")}"'
    # A result must not be able to close its observation and forge another.
    body = result.content.replace("</observation", "<\\/observation")
    if call is not None and not call.name:
        problem = action_problem(call.raw)
        if problem:
            body += f"\nThe action does not follow the protocol: {problem}."
    return f"<observation {attrs}>\n{body}\n</observation>"


def render_messages(messages: Sequence[Message], choice: str = "auto") -> tuple[Message, ...]:
    """The conversation as plain text turns the inner model can read."""
    out: list[Message] = []
    calls: dict[str, ToolCall] = {}
    user_side: list[str] = []

    def flush() -> None:
        if user_side:
            out.append(UserMessage(content="\n\n".join(user_side)))
            user_side.clear()

    for message in messages:
        if isinstance(message, UserMessage):
            user_side.append(message.content)
        elif isinstance(message, ToolResultMessage):
            user_side.append(render_observation(message, calls.get(message.tool_call_id)))
        else:
            flush()
            calls.update((c.id, c) for c in message.tool_calls)
            lines = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
            lines += [f"<action>{render_call(c)}</action>" for c in message.tool_calls]
            text = "\n".join(lines)
            out.append(
                AssistantMessage(
                    content=(TextBlock(text=text),) if text else (), model=message.model
                )
            )
    instruction = choice_instruction(choice)
    if instruction:
        user_side.append(instruction)
    flush()
    return tuple(out)


def render_request(request: ModelRequest) -> ModelRequest:
    """The request the inner model gets: tools and rules in the prompt, history as text."""
    system = "\n\n".join(
        p for p in (request.system, PROTOCOL_RULES, render_tools(request.tools)) if p
    )
    return ModelRequest(
        system=system,
        messages=render_messages(request.messages, request.tool_choice),
        tools=(),
        tool_choice="none",
        settings=request.settings,
        turn=request.step,
    )


def read_response(response: ModelResponse, *, turn: int, inner_name: str) -> ModelResponse:
    """The inner model's text answer as neutral blocks (scratchpads, text, tool calls)."""
    text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    cut = response.finish_reason == "length"
    content = [
        *(b for b in response.content if isinstance(b, ThinkingBlock)),
        *to_blocks(read_text(text), turn=turn, cut=cut),
        *(b for b in response.content if isinstance(b, ToolCall)),
    ]
    has_calls = any(isinstance(b, ToolCall) for b in content)
    return ModelResponse(
        content=tuple(content),
        finish_reason="length" if cut else "tool_calls" if has_calls else "stop",
        usage=response.usage,
        model=f"text:{response.model or inner_name}",
        raw={"text": text, "inner": response.raw},
    )


class TextProtocolModel:
    """Wraps a text-only model so it calls tools through `<action>` JSON.

    Args:
        inner: the model that writes the text.
    """

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = f"text:{inner.name}"

    @property
    def context_window(self) -> int | None:
        """The inner model's window: the text protocol changes no limit."""
        return context_window_of(self.inner)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(render_request(request))
        return repair_response(
            read_response(response, turn=request.step, inner_name=self.inner.name)
        )

    @repairs_text
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Visible text streams as it comes; scratchpads as thinking; each action once
        its closing tag arrives. The final response is read from the whole text."""
        turn, index, splitter = request.step, 0, Splitter()
        async for event in self.inner.stream(render_request(request)):
            if isinstance(event, ThinkingDelta):
                yield event
            elif isinstance(event, TextDelta):
                for kind, value in splitter.feed(event.text):
                    if kind == "text":
                        yield TextDelta(text=value)
                    elif kind == "thinking" and value:
                        yield ThinkingDelta(text=value)
                    elif kind == "action":
                        call = read_action(value, call_id=call_id(turn, index))
                        yield ToolCallDelta(index=index, id=call.id, name=call.name)
                        yield ToolCallDelta(index=index, arguments_delta=call.raw)
                        index += 1
            elif isinstance(event, ResponseDone):
                for kind, value in splitter.close():
                    if kind == "text":
                        yield TextDelta(text=value)
                yield ResponseDone(
                    response=read_response(event.response, turn=turn, inner_name=self.inner.name)
                )
                return

    async def aclose(self) -> None:
        await self.inner.aclose()
