"""Reading the text protocol: split a model's text into visible text, scratchpads and
actions, and read each action's JSON into a tool call. Nothing here raises on any text.

The rules (and why) are in the docstring of `pi_runtime.models.text_protocol`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ..messages import Block, TextBlock, ThinkingBlock, ToolCall, parse_object

SCRATCHPAD_OPEN, SCRATCHPAD_CLOSE = "<scratchpad>", "</scratchpad>"
ACTION_OPEN, ACTION_CLOSE = "<action>", "</action>"
OBSERVATION_OPEN = "<observation"
TOOL_KEY, TOOL_ALIAS, ARGUMENTS_KEY = "tool", "name", "arguments"

Piece = tuple[Literal["text", "thinking", "thinking_end", "action", "open_action"], str]

_ENDS: dict[str, tuple[str, ...]] = {
    "text": (SCRATCHPAD_OPEN, ACTION_OPEN, OBSERVATION_OPEN),
    "thinking": (SCRATCHPAD_CLOSE,),
    "action": (ACTION_CLOSE,),
}
_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NAME_HINTS = tuple(re.compile(rf'"{key}"\s*:\s*"([^"\\]{{1,128}})"') for key in ("tool", "name"))


def _held(buffer: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of `buffer` that may be the start of a tag."""
    for size in range(min(len(buffer), max(map(len, tags)) - 1), 0, -1):
        if any(tag.startswith(buffer[-size:]) for tag in tags):
            return size
    return 0


@dataclass(slots=True)
class Splitter:
    """Splits text fed in chunks (a stream) into pieces; a tag may span two chunks."""

    mode: Literal["text", "thinking", "action", "stopped"] = "text"
    buffer: str = ""

    def feed(self, chunk: str) -> list[Piece]:
        pieces: list[Piece] = []
        self.buffer += chunk
        while self.mode != "stopped":
            tags = _ENDS[self.mode]
            found = [(i, tag) for tag in tags if (i := self.buffer.find(tag)) >= 0]
            if not found:
                if self.mode != "action":  # an action is read whole, at its closing tag
                    keep = _held(self.buffer, tags)
                    cut = len(self.buffer) - keep
                    ready, self.buffer = self.buffer[:cut], self.buffer[cut:]
                    if ready:
                        pieces.append((self.mode, ready))
                break
            at, tag = min(found)
            before, self.buffer = self.buffer[:at], self.buffer[at + len(tag) :]
            if self.mode == "text":
                if before:
                    pieces.append(("text", before))
                if tag == SCRATCHPAD_OPEN:
                    self.mode = "thinking"
                elif tag == ACTION_OPEN:
                    self.mode = "action"
                else:
                    self.mode = "stopped"
            elif self.mode == "thinking":
                pieces += [("thinking", before)] if before else []
                pieces.append(("thinking_end", ""))
                self.mode = "text"
            else:
                pieces.append(("action", before))
                self.mode = "text"
        if self.mode == "stopped":
            self.buffer = ""  # whatever follows an invented observation is not the model's turn
        return pieces

    def close(self) -> list[Piece]:
        """The pieces still held when the text ends: unclosed tags end here."""
        rest, mode, self.buffer, self.mode = self.buffer, self.mode, "", "stopped"
        if mode == "action":
            return [("open_action", rest)]
        if mode == "thinking":
            return [("thinking", rest), ("thinking_end", "")] if rest else [("thinking_end", "")]
        return [("text", rest)] if rest and mode == "text" else []


@dataclass(slots=True)
class Reading:
    """What one answer of the model says, in order of appearance within each kind."""

    thinking: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    actions: list[tuple[str, bool]] = field(default_factory=list)
    """(body, closed) of every action."""
    _open_thinking: list[str] = field(default_factory=list)

    def add(self, pieces: list[Piece]) -> None:
        for kind, value in pieces:
            if kind == "text":
                self.text.append(value)
            elif kind == "thinking":
                self._open_thinking.append(value)
            elif kind == "thinking_end":
                self.thinking.append("".join(self._open_thinking))
                self._open_thinking.clear()
            else:
                self.actions.append((value, kind == "action"))


def read_text(text: str) -> Reading:
    splitter, reading = Splitter(), Reading()
    reading.add(splitter.feed(text))
    reading.add(splitter.close())
    return reading


def to_blocks(reading: Reading, *, turn: int, cut: bool) -> list[Block]:
    """Blocks of one answer: scratchpads, then the visible text, then the tool calls.

    `cut` says the answer hit the output limit: an action left open is then truncated.
    """
    blocks: list[Block] = [ThinkingBlock(text=t.strip()) for t in reading.thinking if t.strip()]
    visible = "".join(reading.text).strip()
    if visible:
        blocks.append(TextBlock(text=visible, phase="commentary" if reading.actions else "final"))
    for i, (body, closed) in enumerate(reading.actions):
        blocks.append(read_action(body, call_id=call_id(turn, i), truncated=cut and not closed))
    return blocks


def call_id(turn: int, index: int) -> str:
    return f"text_{turn}_{index}"


def read_action(body: str, *, call_id: str, truncated: bool = False) -> ToolCall:
    """The tool call an action's body stands for; a broken one still becomes a call."""
    text = unfence(body)
    try:
        name, raw = read_envelope(text)
    except json.JSONDecodeError:
        # Broken JSON: name the tool when the text names one, so the gate answers
        # `invalid_arguments` with the JSON error, and keep the text for the model to fix.
        return ToolCall(id=call_id, name=name_hint(text), raw=text, truncated=truncated)
    except (ValueError, RecursionError):
        # JSON that is not an action: no tool name, so the gate answers `unknown_tool`
        return ToolCall(id=call_id, name="", raw=text, truncated=truncated)
    return ToolCall(
        id=call_id, name=name, raw=raw, arguments=parse_object(raw)[0], truncated=truncated
    )


def unfence(body: str) -> str:
    """The body without surrounding whitespace and without a Markdown code fence."""
    text = body.strip()
    if text.startswith("```"):
        first_line_end = text.find("\n")
        text = "" if first_line_end < 0 else text[first_line_end + 1 :]
        text = text.rstrip()
        if text.endswith("```"):
            text = text[:-3]
        text = text.strip()
    return text


def name_hint(text: str) -> str:
    for pattern in _NAME_HINTS:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return ""


def read_envelope(text: str) -> tuple[str, str]:
    """(tool name, argument text exactly as written) of a well-formed action.

    Raises `json.JSONDecodeError` for text that is not JSON and `ValueError` naming the
    problem for JSON that is not an action envelope.
    """
    members = _members(text)
    keys = [key for key, _, _ in members]
    seen: set[str] = set()
    for key in keys:  # not `keys.count`: a hostile action holds thousands of keys
        if key in seen:
            raise ValueError(f'the key "{key}" appears twice')
        seen.add(key)
    unknown = [k for k in keys if k not in (TOOL_KEY, TOOL_ALIAS, ARGUMENTS_KEY)]
    if unknown:
        raise ValueError(
            f"unexpected key(s) {', '.join(map(json.dumps, unknown))}: an action holds only "
            f'"{TOOL_KEY}" and "{ARGUMENTS_KEY}" (the tool\'s arguments go inside "{ARGUMENTS_KEY}")'
        )
    spans = {key: (start, end) for key, start, end in members}
    if TOOL_KEY in spans and TOOL_ALIAS in spans:
        raise ValueError(f'name the tool once, under "{TOOL_KEY}"')
    start, end = spans.get(TOOL_KEY) or spans.get(TOOL_ALIAS) or (0, 0)
    name = json.loads(text[start:end]) if end else None
    if not isinstance(name, str) or not name:
        raise ValueError(f'the action must name its tool: "{TOOL_KEY}": "TOOL_NAME"')
    if ARGUMENTS_KEY not in spans:
        return name, "{}"
    start, end = spans[ARGUMENTS_KEY]
    return name, text[start:end]


def action_problem(raw: str) -> str | None:
    """Why `raw` (a call's text) is not a well-formed action, or None when it is one."""
    try:
        read_envelope(raw)
    except json.JSONDecodeError as exc:
        return f"the action is not valid JSON: {exc}"
    except RecursionError:
        return "the action is nested too deeply"
    except ValueError as exc:
        return str(exc)
    return None


def _members(text: str) -> list[tuple[str, int, int]]:
    """(key, value start, value end) of each member of the JSON object `text`."""
    value: Any = json.loads(text)  # JSONDecodeError (a ValueError) when not JSON at all
    if not isinstance(value, dict):
        raise ValueError(f"an action is a JSON object, not {type(value).__name__}")
    members: list[tuple[str, int, int]] = []
    at = _skip(text, _skip(text, 0) + 1)  # past "{"
    while text[at] != "}":
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, _skip(text, at) + 1)  # past ":"
        _, end = _DECODER.raw_decode(text, at)
        members.append((key, at, end))
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return members


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return at if match is None else match.end()
