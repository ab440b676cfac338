"""The user turns a composed run writes between its phases.

Each phase's model call reads the whole conversation, so these turns say what the next
call is for. They are runtime turns (`origin` `plan` or `route`), never the start of a
request, and they keep the conversation alternating for providers that require it.
"""

from __future__ import annotations

from ...messages import UserMessage
from ...observe import PlannedStep

FALLBACK_GOAL = "Complete the user's request."
"""The goal of the one-step plan that stands in for a planner answer that missed its
contract (with every tool: in effect, a ReAct run bounded like a step)."""


def _tools(step: PlannedStep) -> str:
    return ", ".join(step.tools) if step.tools else "none (reason from what is above)"


def step_brief(number: int, total: int, step: PlannedStep) -> UserMessage:
    return UserMessage(
        origin="plan",
        content=(
            f"Step {number} of {total}: {step.goal}\n"
            f"Tools for this step: {_tools(step)}.\n"
            "Carry out this step only, then report its result."
        ),
    )


def reflect_brief(number: int, step: PlannedStep, *, step_limit: int | None) -> UserMessage:
    cut = (
        f"\nIts executor used all {step_limit} model calls a step may make before reporting."
        if step_limit is not None
        else ""
    )
    return UserMessage(origin="plan", content=f"Judge step {number}: {step.goal}{cut}")


def replan_brief(number: int, reason: str, *, done: bool, replans: int, most: int) -> UserMessage:
    what = "is done, but the plan must change" if done else "was not done"
    return UserMessage(
        origin="plan",
        content=(
            f"Step {number} {what}: {reason}\n"
            f"Make a new plan for the work that remains (replan {replans} of {most})."
        ),
    )


def compose_brief() -> UserMessage:
    return UserMessage(
        origin="plan",
        content=(
            "Every step of the plan is done. Write the final answer to the user's request "
            "from the results above."
        ),
    )


ROUTE_BRIEFS = {
    "direct": "Answer the request above directly, without tools.",
    "react": "Go on with the request above, using the tools as needed.",
    "plan": "Plan the request above.",
}


def route_brief(mode: str) -> UserMessage:
    return UserMessage(origin="route", content=ROUTE_BRIEFS[mode])
