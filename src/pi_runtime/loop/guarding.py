"""Input and output guardrails at the run's edges (seed 001 §10: guardrails sit on the
state machine's transitions): the user's message before OBSERVE takes it in, the final
answer once THINK has ended the run with it. Tool guardrails live in the gate.

A refusal, or a guardrail failing (fail closed), ends the run `security`. A refused
message never joins the conversation, so no later turn sends it to the model; a refused
answer stays in it only as a notice, so no session shows it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..context import withheld_notice
from ..contract import OutputContract
from ..exceptions import UserError
from ..guardrails import Guardrails, Trip, screen
from ..messages import AssistantMessage, Message, TextBlock, UserMessage, repair_text
from ..observe import Event
from .state import RunState
from .transitions import Step, finish, tripped


def checked_guardrails(guardrails: Guardrails | None, tools: list[str]) -> Guardrails | None:
    """An agent's guardrails, checked against its tool names (None: no checks at all)."""
    if guardrails is None:
        return None
    if not isinstance(guardrails, Guardrails):
        raise UserError(f"guardrails must be a Guardrails, got {guardrails!r}")
    unknown = sorted(set(guardrails.tools) - set(tools))
    if unknown:  # a misspelt name would leave its tool unguarded
        raise UserError(f"tool guardrails name tools the agent does not have: {', '.join(unknown)}")
    return guardrails if guardrails else None


async def screen_input(state: RunState, guardrails: Guardrails) -> Step:
    """The request's user message through the input guardrails: rewritten, or the run
    ended `security` without it."""
    found = [i for i, m in enumerate(state.pending) if isinstance(m, UserMessage) and m.is_request]
    if not found or not guardrails.input:
        return state, []
    index = found[-1]
    message = state.pending[index]
    assert isinstance(message, UserMessage)
    done = await screen(guardrails.input, message.content, stage="input", accept=_text)
    events: list[Event] = [tripped(t) for t in done.trips]
    if done.stopped is not None:
        detail = _detail(done.stopped, "the message")
        stopped, more = finish(replace(state, pending=()), "security", detail)
        return stopped, events + more
    if done.trips:
        pending = list(state.pending)
        pending[index] = replace(message, content=done.value)
        state = replace(state, pending=tuple(pending))
    return state, events


async def screen_output(
    state: RunState, guardrails: Guardrails, contract: OutputContract | None
) -> Step:
    """A final answer through the output guardrails: rewritten (and, with an output
    contract, checked against it again), or withheld and the run ended `security`."""
    if state.stop_reason != "final_answer" or not guardrails.output:
        return state, []

    def accept(value: Any) -> Any:
        if contract is None:
            return _text(value)
        check = contract.validate(json.dumps(value, ensure_ascii=False))
        if not check.ok:
            raise ValueError("it misses the output contract: " + "; ".join(check.errors))
        return check.value

    done = await screen(guardrails.output, state.output, stage="output", accept=accept)
    events: list[Event] = [tripped(t) for t in done.trips]
    stop = done.stopped
    if stop is not None:
        notice = withheld_notice(f"output guardrail {stop.guardrail} refused this answer")
        messages = _answer_replaced(state.messages, notice)
        detail = _detail(stop, "the answer")
        return replace(
            state, stop_reason="security", error=detail, output=None, messages=messages
        ), events
    if done.trips:
        value = done.value
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        state = replace(state, output=value, messages=_answer_replaced(state.messages, text))
    return state, events


def unchecked_answer_withheld(state: RunState, guardrails: Guardrails | None) -> RunState:
    """`state` with a final answer the output guardrails never cleared (the clock ran out
    while they checked it) withheld, as a refused one would be."""
    if guardrails is None or not guardrails.output or state.stop_reason != "final_answer":
        return state
    notice = withheld_notice("the output guardrails did not finish checking this answer")
    return replace(state, output=None, messages=_answer_replaced(state.messages, notice))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return repair_text(value)


def _detail(trip: Trip, what: str) -> str:
    if trip.verdict == "deny":
        return f"{trip.stage} guardrail {trip.guardrail} refused {what}: {trip.reason}"
    return f"{trip.stage} guardrail {trip.guardrail} failed (so it refused {what}): {trip.reason}"


def _answer_replaced(messages: tuple[Message, ...], text: str) -> tuple[Message, ...]:
    """`messages` with the final answer (the last message) saying `text` instead; its
    usage stays, so the request's guards still count the call that wrote it."""
    last = messages[-1] if messages else None
    if not isinstance(last, AssistantMessage):  # THINK always ends on its answer
        return messages
    answer = replace(last, content=(TextBlock(text=text, phase="final"),))
    return (*messages[:-1], answer)
