"""The output contracts of the planner, reflector and router calls, and their values.

Each role answers one JSON object, checked like any output contract (validate → repair
→ fallback, `pi_runtime.contract`): the schema goes to providers with structured output,
a miss is sent back with its errors, and when the repairs are spent the composed run
falls back to a safe value of its own (see `composer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeAlias, cast

from ...contract import OutputContract
from ...observe import PlannedStep

Route: TypeAlias = Literal["direct", "react", "plan"]
ROUTES: tuple[Route, ...] = ("direct", "react", "plan")

MAX_PLAN_STEPS = 7
"""Steps a plan may have (seed 001 §4.4: a planner limits itself to 3-7)."""

CONTRACT_REPAIRS = 2
"""Repairs each planner, reflector and router answer gets before its fallback."""


def plan_contract(tools: Sequence[str]) -> OutputContract:
    """`{"steps": [{"goal": str, "tools": [str]}]}`, the tools among `tools`."""
    names: dict[str, Any] = {"type": "string", "enum": list(tools)} if tools else {"type": "string"}
    step_tools: dict[str, Any] = {"type": "array", "items": names}
    if not tools:
        step_tools["maxItems"] = 0
    schema = {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PLAN_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string", "minLength": 1},
                        "tools": step_tools,
                    },
                    "required": ["goal", "tools"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["steps"],
        "additionalProperties": False,
    }
    return OutputContract.from_schema(schema, name="plan", max_repairs=CONTRACT_REPAIRS)


@cache
def reflection_contract() -> OutputContract:
    """`{"done": bool, "replan": bool, "reason": str}`."""
    return OutputContract.from_schema(
        {
            "type": "object",
            "properties": {
                "done": {"type": "boolean"},
                "replan": {"type": "boolean"},
                "reason": {"type": "string"},
            },
            "required": ["done", "replan", "reason"],
            "additionalProperties": False,
        },
        name="reflection",
        max_repairs=CONTRACT_REPAIRS,
    )


@cache
def route_contract() -> OutputContract:
    """`{"mode": "direct" | "react" | "plan", "confidence": 0..1}`."""
    return OutputContract.from_schema(
        {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": list(ROUTES)},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["mode", "confidence"],
            "additionalProperties": False,
        },
        name="route",
        max_repairs=CONTRACT_REPAIRS,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reflection:
    """A reflector's verdict on one step."""

    done: bool
    replan: bool
    reason: str
    fallback: bool = False


def plan_of(value: dict[str, Any]) -> tuple[PlannedStep, ...]:
    """The steps of a plan that matched `plan_contract` (each step's tools once, in order)."""
    return tuple(
        PlannedStep(
            goal=step["goal"].strip() or step["goal"], tools=tuple(dict.fromkeys(step["tools"]))
        )
        for step in value["steps"]
    )


def reflection_of(value: dict[str, Any]) -> Reflection:
    """The verdict in an answer that matched `reflection_contract()`."""
    return Reflection(done=value["done"], replan=value["replan"], reason=value["reason"])


def route_of(value: dict[str, Any]) -> tuple[Route, float]:
    """(mode, confidence) of an answer that matched `route_contract()`."""
    return cast(Route, value["mode"]), float(value["confidence"])
