"""A composed run: plan-then-execute (seed 001 §9) and per-request routing, as phases.

Each phase is the ordinary driver (`runner.Driver`) over the run's one state, with the
system prompt, tools, gate and contract of its role:

    router     (mode "auto")  {"mode", "confidence"}    → direct, react or plan
    planner                   {"steps": [{goal, tools}]}
    for each step:
      executor  a ReAct loop offered only the step's tools, at most `step_max_steps` calls
      reflector {"done", "replan", "reason"}; a failed step is replanned, at most
                `max_replans` times, then the run stops (`max_steps`, guard `max_replans`)
    compose   the final answer, under the agent's own system prompt and output contract

The state is shared, so the guards are too: steps, tokens, cost, tool calls, loop hashes
and the clock count every phase, each phase after the first starts at REFLECT (the guards
are checked before its first call), and a phase that stops for any reason but its own
ends the whole run as it stands, well-formed. Every model call's reply joins the
conversation (a scripted model's step is the number of replies so far, as ever).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from ...contract import OutputContract
from ...messages import UserMessage
from ...models import TOOL_CHOICE_MODES, ToolDefinition
from ...observe import (
    Event,
    PlanCreated,
    PlannedStep,
    PlanStepFinished,
    PlanStepStarted,
    Replanned,
    RouteChosen,
)
from .. import transitions as t
from ..runner import Driver
from ..state import RunState, evolve
from .briefs import (
    FALLBACK_GOAL,
    compose_brief,
    reflect_brief,
    replan_brief,
    route_brief,
    step_brief,
)
from .contracts import (
    Reflection,
    Route,
    plan_of,
    reflection_contract,
    reflection_of,
    route_contract,
    route_of,
)
from .roles import Composition

Outcome: TypeAlias = Literal["answered", "step_limit"]


class _Ended(Exception):
    """A phase stopped the run: `state` is its ending."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state.stop_reason)
        self.state = state


class _StepLimit:
    """Passes events on, holding back the guard event of a plan step's own step limit:
    that limit ends the step, not the run."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.hit = False

    def __call__(self, event: Event) -> None:
        if event.kind == "guard" and event.guard == "max_steps":
            self.hit = True
            return
        self.emit(event)


def _begin(state: RunState, brief: UserMessage | None, tool_choice: str = "auto") -> RunState:
    """The state a later phase starts from: REFLECT, with `brief` waiting for OBSERVE."""
    return evolve(
        state,
        phase="reflect",
        pending=(*state.pending, brief) if brief is not None else state.pending,
        stop_reason=None,
        output=None,
        error=None,
        repairs=0,
        response=None,
        outcomes=(),
        contract_errors=(),
        next_tool_choice=tool_choice,
    )


class ComposedRun:
    """Runs one request in phases; `run_transitions` and `state` as `Driver` has them."""

    def __init__(self, composition: Composition, base: Driver) -> None:
        self.composition = composition
        self.base = base
        self._driver = base
        self._started = 0.0
        # the request's tool choice is for its first call that may use tools: the first
        # executor's (or the routed ReAct loop's), not a role's that answers JSON
        self._choice = base.state.next_tool_choice

    @property
    def state(self) -> RunState:
        """The latest state of the phase running now (or last run)."""
        return self._driver.state

    async def run_transitions(self) -> RunState:
        self._started = time.perf_counter()
        try:
            return await self._run(evolve(self.base.state, next_tool_choice="auto"))
        except _Ended as ended:
            return ended.state

    async def _run(self, state: RunState) -> RunState:
        brief = None
        if self.composition.mode == "auto":
            state, route = await self._route(state)
            brief = route_brief(route)
            if route == "direct":
                return await self._answer(state, brief)
            if route == "react":
                base = self.base
                return await self._phase(
                    state,
                    brief,
                    system=base.system,
                    prompt=base.prompt,
                    tools=base.tools,
                    contract=base.contract,
                    whole=True,
                    final=True,
                    tool_choice=self._take_choice(tuple(d.name for d in base.tools)),
                )
        return await self._plan_and_execute(state, brief)

    async def _plan_and_execute(self, state: RunState, brief: UserMessage | None) -> RunState:
        most = self.composition.max_replans
        state, steps = await self._plan(state, brief, revision=0)
        replans = index = 0
        while index < len(steps):
            number, step = index + 1, steps[index]
            before = state.steps
            state, outcome = await self._execute(state, number, len(steps), step, replans)
            calls = state.steps - before
            state, verdict = await self._reflect(state, number, step, outcome)
            self.base.emit(
                PlanStepFinished(
                    number=number,
                    revision=replans,
                    outcome=outcome,
                    done=verdict.done,
                    replan=verdict.replan,
                    reason=verdict.reason,
                    fallback=verdict.fallback,
                    model_calls=calls,
                )
            )
            if verdict.done and (not verdict.replan or replans >= most):
                index += 1  # done; a plan that cannot change any more goes on as it is
                continue
            if replans >= most:
                detail = (
                    f"plan step {number} was not done after {replans} replan(s): {verdict.reason}"
                )
                return self._stop(
                    t.finish(_begin(state, None), "max_steps", detail, guard="max_replans")
                )
            replans += 1
            self.base.emit(
                Replanned(number=number, reason=verdict.reason, replans=replans, max_replans=most)
            )
            again = replan_brief(
                number, verdict.reason, done=verdict.done, replans=replans, most=most
            )
            state, steps = await self._plan(state, again, revision=replans)
            index = 0
        return await self._answer(state, compose_brief())

    def _take_choice(self, tools: tuple[str, ...]) -> str:
        """The request's tool choice, once, when it fits a phase offering `tools`."""
        choice, self._choice = self._choice, "auto"
        return choice if choice in TOOL_CHOICE_MODES or choice in tools else "auto"

    def _stop(self, step: t.Step) -> RunState:
        """The run ended by the composer itself, its events written."""
        ended, events = step
        for event in events:
            self.base.emit(event)
        return ended

    async def _phase(
        self,
        state: RunState,
        brief: UserMessage | None,
        *,
        system: str,
        prompt: dict[str, Any],
        tools: tuple[ToolDefinition, ...],
        contract: OutputContract | None = None,
        whole: bool = False,
        limits_steps: int | None = None,
        emit: Callable[[Event], None] | None = None,
        tool_choice: str = "auto",
        final: bool = False,
    ) -> RunState:
        """One phase run to its end. `whole`: every tool, retrieval included, as a plain
        ReAct run has them; else only `tools`, and the gate refuses the others. `final`:
        its answer is the run's, so the output guardrails check it (not a plan, a route or
        a verdict, which are the runtime's own JSON)."""
        base = self.base
        guardrails = base.guardrails
        if guardrails is not None and not final:
            guardrails = replace(guardrails, output=())
        if brief is not None:
            state = _begin(state, brief, tool_choice)
        names = {d.name for d in tools}
        self._driver = replace(
            base,
            system=system,
            prompt=prompt,
            tools=tools,
            contract=contract,
            gate=base.gate if whole else base.gate.narrowed(names),
            retriever=base.retriever if whole else None,
            specs=base.specs if whole else (),
            limits=base.limits
            if limits_steps is None
            else replace(base.limits, max_steps=limits_steps),
            emit=emit or base.emit,
            state=state,
            started=self._started,
            guardrails=guardrails,
        )
        return await self._driver.run_transitions()

    async def _ask(
        self,
        state: RunState,
        brief: UserMessage | None,
        system: str,
        prompt: dict[str, Any],
        contract: OutputContract,
    ) -> tuple[RunState, dict[str, Any] | None]:
        """A role's JSON answer under `contract`; None when it missed after its repairs."""
        state = await self._phase(
            state, brief, system=system, prompt=prompt, tools=(), contract=contract
        )
        if state.stop_reason == "final_answer":
            return state, state.output
        if state.stop_reason == "contract_violation":
            return state, None
        raise _Ended(state)

    async def _route(self, state: RunState) -> tuple[RunState, Route]:
        router = self.composition.router
        assert router is not None
        state, value = await self._ask(state, None, router.text, router.ref, route_contract())
        route: Route = "react"  # the default mode stands in for an unreadable choice
        confidence = None
        if value is not None:
            route, confidence = route_of(value)
        self.base.emit(RouteChosen(mode=route, confidence=confidence, fallback=value is None))
        return state, route

    async def _plan(
        self, state: RunState, brief: UserMessage | None, *, revision: int
    ) -> tuple[RunState, tuple[PlannedStep, ...]]:
        c = self.composition
        state, value = await self._ask(state, brief, c.planner.text, c.planner.ref, c.plan_contract)
        steps: tuple[PlannedStep, ...]
        if value is None:
            steps = (PlannedStep(goal=FALLBACK_GOAL, tools=tuple(d.name for d in self.base.tools)),)
        else:
            steps = plan_of(value)
        self.base.emit(PlanCreated(steps=steps, revision=revision, fallback=value is None))
        return state, steps

    async def _execute(
        self, state: RunState, number: int, total: int, step: PlannedStep, revision: int
    ) -> tuple[RunState, Outcome]:
        c, base = self.composition, self.base
        self.base.emit(
            PlanStepStarted(
                number=number, total=total, goal=step.goal, tools=step.tools, revision=revision
            )
        )
        # the step's own limit, when it comes before the run's: its guard ends the step only
        cap = state.request_steps + c.step_max_steps
        capped = cap < base.limits.max_steps
        held = _StepLimit(base.emit) if capped else None
        tools = tuple(d for d in base.tools if d.name in step.tools)
        state = await self._phase(
            state,
            step_brief(number, total, step),
            system=c.executor.text,
            prompt=c.executor.ref,
            tools=tools,
            limits_steps=cap if capped else None,
            tool_choice=self._take_choice(step.tools),
            emit=held,
        )
        if state.stop_reason == "final_answer":
            return state, "answered"
        if held is not None and held.hit:
            return state, "step_limit"
        raise _Ended(state)

    async def _reflect(
        self, state: RunState, number: int, step: PlannedStep, outcome: Outcome
    ) -> tuple[RunState, Reflection]:
        c = self.composition
        cut = c.step_max_steps if outcome == "step_limit" else None
        brief = reflect_brief(number, step, step_limit=cut)
        state, value = await self._ask(
            state, brief, c.reflector.text, c.reflector.ref, reflection_contract()
        )
        if value is not None:
            return state, reflection_of(value)
        answered = outcome == "answered"
        reason = (
            "the reflection missed its contract; the step counts as done because its "
            "executor reported"
            if answered
            else "the reflection missed its contract and the step's executor did not report"
        )
        return state, Reflection(done=answered, replan=not answered, reason=reason, fallback=True)

    async def _answer(self, state: RunState, brief: UserMessage) -> RunState:
        """The final answer, without tools, as the agent itself: its system prompt, its
        output contract."""
        base = self.base
        return await self._phase(
            state,
            brief,
            system=base.system,
            prompt=base.prompt,
            tools=(),
            contract=base.contract,
            final=True,
        )
