"""The Messages API request body for a neutral `ModelRequest` (Anthropic's wire format)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from ..exceptions import ModelError
from ..messages import AssistantMessage, Message, TextBlock, ThinkingBlock, ToolResultMessage
from .base import ModelRequest
from .history import normalise_history

PROVIDER = "anthropic"
REDACTED_THINKING_PREFIX = "anthropic-redacted:"
"""A `ThinkingBlock` with empty text and this prefix on its signature is a redacted
thinking block; the rest of the signature is its opaque `data`."""

Thinking: TypeAlias = int | Literal["adaptive"] | None
"""Extended thinking: a token budget, `"adaptive"`, or off."""

_EPHEMERAL = {"type": "ephemeral"}
_TOOL_CHOICES = {"auto": "auto", "required": "any", "none": "none"}


def anthropic_body(
    request: ModelRequest, *, model: str, max_tokens: int, thinking: Thinking, cache: bool
) -> dict[str, Any]:
    """The Messages API request body for `request` (without `stream`)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": _encode_messages(normalise_history(request.messages, target=PROVIDER)),
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        body["tools"] = [
            {
                "name": t.name,
                **({"description": t.description} if t.description else {}),
                "input_schema": t.parameters,
            }
            for t in request.tools
        ]
        choice = request.tool_choice
        body["tool_choice"] = (
            {"type": _TOOL_CHOICES[choice]}
            if choice in _TOOL_CHOICES
            else {"type": "tool", "name": choice}
        )
    elif request.tool_choice not in ("auto", "none"):
        raise ModelError(f"tool choice {request.tool_choice!r} needs tools, and none are offered")
    if request.settings.temperature is not None:
        body["temperature"] = request.settings.temperature
    if request.output is not None and request.output.strict:
        # native structured output; a non-strict contract (free-form objects) relies on
        # the instructions in the system prompt and Pi's validation instead
        body["output_config"] = {"format": {"type": "json_schema", "schema": request.output.schema}}
    if thinking == "adaptive":
        body["thinking"] = {"type": "adaptive"}
    elif thinking is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    if cache:
        _mark_cache_breakpoints(body)
    return body


def _mark_cache_breakpoints(body: dict[str, Any]) -> None:
    """Cache the stable prefix (tools, then system) and the conversation so far."""
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = dict(_EPHEMERAL)
    if body.get("system"):
        body["system"][-1]["cache_control"] = dict(_EPHEMERAL)
    if body["messages"]:
        last = body["messages"][-1]["content"][-1]
        if last["type"] not in ("thinking", "redacted_thinking"):  # these take no marker
            last["cache_control"] = dict(_EPHEMERAL)


def _encode_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns; consecutive same-role turns are merged."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AssistantMessage) else "user"
        blocks = _encode_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _encode_blocks(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, ToolResultMessage):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.content:
            result["content"] = message.content
        if message.is_error:
            result["is_error"] = True
        return [result]
    if not isinstance(message, AssistantMessage):
        return [{"type": "text", "text": message.content}] if message.content else []
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingBlock):
            signature = block.signature or ""
            if signature.startswith(REDACTED_THINKING_PREFIX):
                data = signature.removeprefix(REDACTED_THINKING_PREFIX)
                blocks.append({"type": "redacted_thinking", "data": data})
            else:
                blocks.append({"type": "thinking", "thinking": block.text, "signature": signature})
        else:
            # a cut-off call has no parse; its error result tells the model why
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": block.arguments or {},
                }
            )
    return blocks
