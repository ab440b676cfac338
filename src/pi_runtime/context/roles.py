"""Prompt roles (seed 001 §4.4): the router, planner, executor and reflector of a
plan-mode or routed run.

Each role is a versioned template (`router@1`, `planner@1`, …) rendered from the agent's
`PromptParts`, so a role prompt carries the agent's role, task, rules and presets, and
every model call records the template it came from, as calls under `system@1` do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..models import ToolDefinition
from .prompt import PromptParts, prompt_values, tool_summary
from .templates import PromptTemplate, load_template

Role: TypeAlias = Literal["router", "planner", "executor", "reflector"]
ROLES: tuple[Role, ...] = ("router", "planner", "executor", "reflector")


@dataclass(frozen=True, slots=True, kw_only=True)
class RolePrompt:
    """A role's system prompt and the template it was rendered from."""

    text: str
    template: PromptTemplate

    @property
    def ref(self) -> dict[str, Any]:
        """What traces record about it: name, version, sha256."""
        return self.template.ref


def render_role(
    role: Role,
    parts: PromptParts,
    *,
    tools: Sequence[ToolDefinition],
    values: dict[str, str] | None = None,
) -> RolePrompt:
    """The system prompt of `role` for an agent with `parts` and `tools`.

    Values a template may use: every part (`$role`, `$task`, `$tool_rules`, …, as the
    system prompt gets them, presets included), `$tools` (one line per tool) and `values`.
    """
    template = load_template(role)
    filled = {**prompt_values(parts), "tools": tool_summary(tools), **(values or {})}
    return RolePrompt(text=template.render(filled), template=template)
