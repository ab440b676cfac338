"""The driver: applies transitions and performs their effects (model calls, tools, clock)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from ..context import ContextBuilder
from ..contract import OutputContract
from ..exceptions import ModelError
from ..guardrails import Guardrails
from ..messages import AssistantMessage, ToolCall, redact, repair_text
from ..messages.canonical import action_hash
from ..models import (
    Model,
    ModelRequest,
    ModelSettings,
    OutputFormat,
    ToolDefinition,
)
from ..observe import (
    ContractChecked,
    Event,
    ModelErrorEvent,
    ModelRequested,
    ModelResponded,
    ToolsSelected,
)
from ..tools import Gate, ToolOutcome, ToolSpec, backoff
from ..tools.retrieval import ToolRetriever, retrieval_query
from ..tools.scope import RunScope, run_scope
from . import transitions as t
from .answer import AnswerReader
from .breakers import screen
from .call_ids import CallIds
from .children import charged, scope_for
from .guarding import screen_input, screen_output, unchecked_answer_withheld
from .guards import Limits
from .metering import metered
from .pool import Hold, admit
from .state import RunState, evolve

Emit = Callable[[Event], None]

_NAME = attrgetter("name")


@dataclass(slots=True, kw_only=True)
class Driver:
    """Everything a run needs besides its state."""

    model: Model
    gate: Gate
    limits: Limits
    system: str
    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings
    emit: Emit
    live: Emit | None = None
    model_retries: int = 2
    retry_base_s: float = 0.5
    max_retry_after_s: float = 60.0
    state: RunState
    builder: ContextBuilder = field(default_factory=ContextBuilder)
    runtime: str = ""
    prompt: dict[str, Any] = field(default_factory=dict)
    contract: OutputContract | None = None
    retriever: ToolRetriever | None = None
    specs: tuple[ToolSpec, ...] = ()
    started: float = 0.0
    """When the run began (`perf_counter`); 0 until `run_transitions` sets it. A phase of
    a composed run is given its run's start, so clock and metrics count from there."""
    reader: AnswerReader = field(init=False)
    request_elapsed_s: float = 0.0
    """Seconds earlier runs of the same request took: the wall clock covers them too."""
    run_id: str = ""
    scope: RunScope | None = None
    """What is left of the budget while tool calls run; child runs charge to it."""
    outer: RunScope | None = None
    """A child run's parent's scope: its model calls are drawn from it (`pool`)."""
    guardrails: Guardrails | None = None
    """Input and output checks (tool checks are the gate's)."""
    call_ids: CallIds | None = None
    """The conversation's call ids, read from it at the first call (see `call_ids`)."""

    async def run_transitions(self) -> RunState:
        """Run transitions until DONE. Every ending, including the clock's, is a state.

        `self.state` always holds the latest state, so a caller that sees an exception
        can still end the run from where it got to.
        """
        loop = asyncio.get_running_loop()
        now = time.perf_counter()
        if not self.started:  # else a phase of a composed run: the run's start stands
            self.started = now
        self.reader = AnswerReader(self.model, self.live)
        clock = self.limits.wall_clock_s
        spent = now - self.started + self.request_elapsed_s
        deadline = None if clock is None else loop.time() + clock - spent
        try:
            # one clock for the whole run, not one per transition: entering a timeout
            # costs a timer each time, and the deadline is the same for every transition
            async with asyncio.timeout_at(deadline):
                guardrails = self.guardrails
                if guardrails is not None and guardrails.input:
                    self.state = self._apply(await screen_input(self.state, guardrails))
                while (phase := self.state.phase) != "done":
                    # only THINK and ACT wait (for the model, for tools): OBSERVE and
                    # REFLECT are plain calls, not a coroutine each per turn
                    if phase == "think":
                        self.state = await self._think(self.state)
                    elif phase == "act":
                        self.state = await self._act(self.state)
                    else:
                        self.state = self._settle(self.state)
                if guardrails is not None and guardrails.output:
                    self.state = self._apply(
                        await screen_output(self.state, guardrails, self.contract)
                    )
        except TimeoutError:
            self.state = self._charge_unfinished(self.state)
            state = unchecked_answer_withheld(self.state, self.guardrails)
            self.state = self._apply(
                t.interrupted(state, "wall_clock", f"the request exceeded {clock:g}s")
            )
        except asyncio.CancelledError:
            self.state = self._charge_unfinished(self.state)  # the run's ending counts it
            raise
        return self.state

    def _settle(self, state: RunState) -> RunState:
        """OBSERVE or REFLECT: transitions with no effect to wait for."""
        if state.phase == "observe":
            return self._apply(t.observe(state))
        elapsed = time.perf_counter() - self.started + self.request_elapsed_s
        return self._apply(t.reflect(state, self.limits, elapsed))

    async def _act(self, state: RunState) -> RunState:
        assert state.response is not None
        calls = state.response.tool_calls
        # hashed once here for both the breakers and ACT's loop detection
        digests = tuple(action_hash(c.name, c.arguments, c.raw) for c in calls)
        elapsed = time.perf_counter() - self.started + self.request_elapsed_s
        self.scope = scope = scope_for(
            self.limits, state, run_id=self.run_id, elapsed_s=elapsed, outer=self.outer
        )
        with run_scope(scope):
            outcomes = await self._run_tools(state, calls, digests)
        self.scope = None
        if scope.charges:  # sub-agents ran: their usage is this run's too
            state, outcomes, events = charged(state, outcomes, scope.charges)
            for event in events:
                self.emit(event)
        return self._apply(t.act(state, outcomes, digests))

    def _charge_unfinished(self, state: RunState) -> RunState:
        """What child runs cut off by the clock spent, still counted."""
        scope, self.scope = self.scope, None
        if scope is None or not scope.charges:
            return state
        state, _, events = charged(state, (), scope.charges)
        for event in events:
            self.emit(event)
        return state

    async def _run_tools(
        self, state: RunState, calls: tuple[ToolCall, ...], digests: tuple[str, ...]
    ) -> tuple[ToolOutcome, ...]:
        """The outcomes of the response's calls: the breakers' refusals, the gate's runs."""
        refused = screen(
            calls,
            digests,
            limits=self.limits,
            made=state.tool_calls,
            previous=state.actions[-1] if state.actions else None,
        )
        if not any(refused):  # the usual case: the gate runs them all, in order
            return await self.gate.run_all(calls)
        allowed = [c for c, r in zip(calls, refused, strict=True) if r is None]
        ran = iter(await self.gate.run_all(allowed) if allowed else ())
        return tuple(r if r is not None else next(ran) for r in refused)

    async def _select(self, state: RunState) -> tuple[ToolDefinition, ...]:
        """The tools retrieval selected for this call."""
        assert self.retriever is not None
        query = retrieval_query(state.messages)
        selection = await asyncio.to_thread(self.retriever.select, query, self.specs)
        self.emit(
            ToolsSelected(
                turn=state.turns,
                method=selection.method,
                selected=selection.selected,
                scores=selection.scores,
                fallback_reason=selection.fallback_reason,
            )
        )
        chosen = set(selection.selected)
        return tuple(d for d in self.tools if d.name in chosen)

    async def _think(self, state: RunState) -> RunState:
        # all the tools, or what retrieval selected
        tools = (
            self.tools if self.retriever is None or not self.specs else await self._select(state)
        )
        built = await self.builder.build(
            system=self.system,
            tools=tools,
            messages=state.messages,
            anchor=state.anchor,
            runtime=self.runtime,
        )
        request = ModelRequest(
            system=self.system,
            messages=built.messages,
            tools=tools,
            tool_choice=state.next_tool_choice,
            settings=self.settings,
            turn=state.turns,
            output=self.output_format,
        )
        input_tokens = built.total_tokens
        if built.summary_usage is not None:  # the build asked a model to summarise: billed
            state = evolve(state, usage=state.usage + built.summary_usage)
            Hold(self.outer).spent(built.summary_usage)  # and drawn from a shared budget
        hold = admit(state, self.outer, input_tokens, self.model.name)
        if isinstance(hold, tuple):  # a child whose siblings have spent what it shares
            return self._apply(hold)
        with hold:  # siblings see this call's input at once, and its usage when it ends
            self.emit(
                ModelRequested(
                    turn=state.turns,
                    step=state.steps + 1,
                    message_count=len(state.messages),
                    tool_choice=state.next_tool_choice,
                    tools=tuple(map(_NAME, tools)),
                    input_tokens=input_tokens,
                    context=built.report(),
                    summary=built.summary,
                    prompt=self.prompt,
                )
            )
            response = await self._call_model(request, state.steps + 1, input_tokens)
            if isinstance(response, str):
                return self._apply(t.model_failed(state, response))
            hold.spent(response.usage)
        calls = response.tool_calls
        if calls:
            if self.call_ids is None:
                self.call_ids = CallIds(state.messages)
            response = self.call_ids.kept(response, calls, state.steps + 1)
        return self._apply(t.think(state, response, self._verdict(state, response)))

    @property
    def output_format(self) -> OutputFormat | None:
        c = self.contract
        return None if c is None else OutputFormat(name=c.name, schema=c.schema, strict=c.strict)

    def _verdict(self, state: RunState, response: AssistantMessage) -> t.Verdict | None:
        """The contract's verdict on a final answer (None: no contract, or tool calls)."""
        if self.contract is None or response.tool_calls:
            return None
        check = self.contract.validate(response.text)
        self.emit(
            ContractChecked(
                contract=self.contract.name,
                attempt=state.repairs + 1,
                ok=check.ok,
                errors=check.errors,
            )
        )
        return t.Verdict(
            value=check.value,
            errors=check.errors,
            repair="" if check.ok else self.contract.repair_message(check),
            max_repairs=self.contract.max_repairs,
            fallback=self.contract.fallback,
        )

    def _apply(self, step: t.Step) -> RunState:
        state, events = step
        for event in events:
            self.emit(event)
        return state

    async def _call_model(
        self, request: ModelRequest, step: int, counted_input: int
    ) -> AssistantMessage | str:
        """The model's answer, or why there is none. Transient failures are retried."""
        attempt = 0
        while True:
            attempt += 1
            began = time.perf_counter()
            try:
                try:
                    response, first_tool_at, first_token_at = await self.reader.read(
                        request, self.started
                    )
                except TimeoutError as exc:
                    # the adapter's own timeout (the run's clock arrives as a cancellation)
                    raise ModelError(f"model call timed out: {exc}", transient=True) from exc
            except ModelError as exc:
                retry = exc.transient and attempt <= self.model_retries
                delay = self._delay(attempt, exc.retry_after_s) if retry else None
                message = redact(repair_text(exc.message))
                if delay is not None and delay > self.max_retry_after_s:
                    # waiting that long would only spend the run's clock: fail now, say why
                    message = f"{message} (the provider asked to wait {delay:g}s; the limit is {self.max_retry_after_s:g}s)"
                    delay = None
                self.emit(
                    ModelErrorEvent(
                        turn=request.step,
                        step=step,
                        message=message,
                        transient=exc.transient,
                        attempt=attempt,
                        retry_in_ms=None if delay is None else round(delay * 1000, 3),
                    )
                )
                if delay is None:
                    return message
                await asyncio.sleep(delay)
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an adapter bug must still end the run well-formed
                message = redact(repair_text(f"{type(exc).__name__}: {exc}"))
                self.emit(
                    ModelErrorEvent(
                        turn=request.step,
                        step=step,
                        message=message,
                        transient=False,
                        attempt=attempt,
                    )
                )
                return message
            latency = (time.perf_counter() - began) * 1000
            answer = t.within_output_limit(response.to_message())
            usage, source = metered(answer, counted_input, self.builder, self.model.name)
            if usage is not answer.usage:  # the provider's own figures: nothing to replace
                answer = replace(answer, usage=usage)
            self.emit(
                ModelResponded(
                    turn=request.step,
                    step=step,
                    message=answer,
                    raw=response.raw,
                    latency_ms=round(latency, 3),
                    first_tool_call_at_ms=first_tool_at,
                    first_token_at_ms=first_token_at,
                    usage_source=source,
                )
            )
            return answer

    def _delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return max(0.0, retry_after_s)
        return backoff(attempt, base_s=self.retry_base_s, max_s=float("inf"))
