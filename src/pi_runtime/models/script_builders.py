"""Builders for script steps and tool calls: what a test writes instead of raw dicts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from ._deltas import parse_arguments
from .scripted import ScriptStep


def _raw(arguments: Mapping[str, Any] | str | None) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments or {}), ensure_ascii=False, separators=(",", ":"))


def function_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    /,
    *,
    id: str | None = None,
    **step: Any,
) -> ScriptStep:
    """A script step in which the model calls one tool.

    Args:
        name: the tool name.
        arguments: the arguments as a mapping, or as raw text (to script malformed JSON).
        id: the call id; by default `call_{step}_{i}`.
        **step: other `ScriptStep` fields (`text`, `thinking`, `usage`, `finish_reason`, ...).
    """
    written = arguments if isinstance(arguments, str) else dict(arguments or {})
    call: dict[str, Any] = {"name": name, "arguments": written}
    if id is not None:
        call["id"] = id
    return ScriptStep.model_validate({"tool_calls": [call], **step})


def parallel_calls(*calls: ScriptStep, **step: Any) -> ScriptStep:
    """One script step holding the tool calls of several `function_call` steps."""
    merged = [call.model_dump(exclude_none=True) for each in calls for call in each.tool_calls]
    return ScriptStep.model_validate({"tool_calls": merged, **step})


def text(content: str, /, **step: Any) -> ScriptStep:
    """A script step in which the model answers with `content` (other fields as keywords)."""
    return ScriptStep.model_validate({"text": content, **step})


def plan_answer(*steps: tuple[str, list[str]], **step: Any) -> ScriptStep:
    """A planner's answer in plan mode: `plan_answer(("goal", ["tool"]), ...)`."""
    plan = {"steps": [{"goal": goal, "tools": list(tools)} for goal, tools in steps]}
    return text(json.dumps(plan, ensure_ascii=False), **step)


def reflection_answer(
    done: bool, reason: str = "", *, replan: bool = False, **step: Any
) -> ScriptStep:
    """A reflector's verdict on a plan step (`replan` defaults to False)."""
    verdict = {"done": done, "replan": replan, "reason": reason}
    return text(json.dumps(verdict, ensure_ascii=False), **step)


def route_answer(mode: str, confidence: float = 0.9, **step: Any) -> ScriptStep:
    """A router's choice in `auto` mode: `direct`, `react` or `plan`."""
    return text(json.dumps({"mode": mode, "confidence": confidence}), **step)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    /,
    *,
    id: str = "call_1",
    truncated: bool = False,
) -> ToolCall:
    """A neutral `ToolCall` as an adapter would produce it, for tests below the loop."""
    raw = _raw(arguments)
    return ToolCall(id=id, name=name, raw=raw, arguments=parse_arguments(raw), truncated=truncated)
