"""`Composition`: how an agent composes a run (its mode), and its role prompts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from ...context import PromptParts, RolePrompt, render_role
from ...contract import OutputContract
from ...exceptions import UserError
from ...models import ToolDefinition
from .contracts import MAX_PLAN_STEPS, plan_contract

if TYPE_CHECKING:
    from ..runner import Driver
    from .composer import ComposedRun

Mode: TypeAlias = Literal["react", "plan", "auto"]
MODES: tuple[Mode, ...] = ("react", "plan", "auto")


def check_mode(mode: object, max_replans: object, step_max_steps: object) -> None:
    """Raise UserError unless these are a mode and plan limits an agent can have."""
    if mode not in MODES:
        raise UserError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if isinstance(max_replans, bool) or not isinstance(max_replans, int) or max_replans < 0:
        raise UserError(f"max_replans must be an integer >= 0, got {max_replans!r}")
    if (
        isinstance(step_max_steps, bool)
        or not isinstance(step_max_steps, int)
        or step_max_steps < 1
    ):
        raise UserError(f"step_max_steps must be an integer >= 1, got {step_max_steps!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Composition:
    """A plan-mode or routed agent's phases: its role prompts, contracts and limits.

    Attributes:
        mode: `plan` (plan, execute step by step, reflect, replan) or `auto` (a router
            picks `direct`, `react` or `plan` for each request).
        max_replans: replans a run may make; a step still failing after them stops it.
        step_max_steps: model calls each plan step's executor may make.
    """

    mode: Mode
    max_replans: int
    step_max_steps: int
    router: RolePrompt | None
    planner: RolePrompt
    executor: RolePrompt
    reflector: RolePrompt
    plan_contract: OutputContract

    @classmethod
    def of(
        cls,
        mode: Mode,
        *,
        max_replans: int,
        step_max_steps: int,
        parts: PromptParts,
        tools: Sequence[ToolDefinition],
    ) -> Composition | None:
        """The composition of an agent with `parts` and (offered) `tools`; None for
        `react`, which runs as it always has."""
        check_mode(mode, max_replans, step_max_steps)
        if mode == "react":
            return None
        extra = {"max_plan_steps": str(MAX_PLAN_STEPS)}
        return cls(
            mode=mode,
            max_replans=max_replans,
            step_max_steps=step_max_steps,
            router=render_role("router", parts, tools=tools) if mode == "auto" else None,
            planner=render_role("planner", parts, tools=tools, values=extra),
            executor=render_role("executor", parts, tools=tools),
            reflector=render_role("reflector", parts, tools=tools),
            plan_contract=plan_contract([d.name for d in tools]),
        )

    def runner(self, driver: Driver) -> ComposedRun:
        """The composed run of the request `driver` was built for."""
        from .composer import ComposedRun  # the composer imports this module

        return ComposedRun(self, driver)
