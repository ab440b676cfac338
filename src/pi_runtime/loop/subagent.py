"""Sub-agents: an agent as a tool of another (`Agent.as_tool`, `[subagents.NAME]`).

The parent's model calls the tool with `{"task": "…"}`, checked by the gate like any
call. The child runs with its own model, tools, allow-list and limits, inside what is
left of the parent's budget, and its usage is counted in the parent's (`children`).

- Its final answer is the tool result; one larger than `max_answer_bytes` goes through
  `spill` (e.g. `data.answers.spill_to(plane)`: the parent reads page 1 and a
  reference), or is cut with a marker by the gate when there is no spill.
- A child that does not complete is a `subagent_failed` tool error naming its stop
  reason, and the parent goes on; one stopped for `security` stops the parent too.
- Memory: a fresh conversation per call by default. `keep_history=True` keeps the
  child's conversation across the calls of one parent run (in this process), so a
  follow-up task can build on the last one; a call that fails leaves it as it was.
- The child's system prompt gets the sub-agent rules of seed 000 (`PromptParts.
  subagent`): no text between tool calls, one report at the end.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from ..context import PromptParts, render_system_prompt
from ..context.prompt import DEFAULT_ROLE
from ..exceptions import SecurityViolation, ToolError, UserError
from ..messages import Message, ToolErrorKind, clipped
from ..tools import ToolSpec, encode_result, tool
from ..tools.scope import current_call

if TYPE_CHECKING:
    from .agent import Agent
    from .run_result import RunResult

Spill = Callable[[str, str], str]
"""(answer, sub-agent name) → what the parent reads instead of an answer too large for
its context, e.g. the first page of the answer stored in the data plane."""

DEFAULT_ANSWER_BYTES = 16_000
TASK_DESCRIPTION = (
    "The whole task: what to do and what to report back. The sub-agent sees nothing "
    "else of this conversation, so include every fact it needs."
)
SUBAGENT_UNCERTAINTY = (
    "- When key information is missing, do not guess: say in your report what is missing."
)
_ASK_THE_USER = PromptParts().uncertainty
_KEPT_RUNS = 16  # parent runs whose child conversations `keep_history` holds
_MAX_DETAIL = 300  # characters of the child's own error quoted to the parent's model


@dataclass(slots=True)
class _Conversation:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    messages: tuple[Message, ...] = ()


class _Memory:
    """The child's conversation per parent run, for the latest few parent runs."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, _Conversation] = OrderedDict()

    def of(self, run_id: str) -> _Conversation:
        conversation = self._runs.pop(run_id, None) or _Conversation()
        self._runs[run_id] = conversation
        while len(self._runs) > _KEPT_RUNS:
            self._runs.popitem(last=False)
        return conversation


def subagent_tool(
    agent: Agent,
    name: str,
    description: str,
    *,
    keep_history: bool = False,
    spill: Spill | None = None,
    max_answer_bytes: int = DEFAULT_ANSWER_BYTES,
) -> ToolSpec:
    """`agent` as a tool named `name` (see `Agent.as_tool`)."""
    if not isinstance(description, str) or not description.strip():
        raise UserError(f"sub-agent {name!r} needs a description: the parent reads it")
    if not isinstance(keep_history, bool):
        raise UserError(f"keep_history must be true or false, got {keep_history!r}")
    if spill is not None and not callable(spill):
        raise UserError(f"spill must be a callable (answer, name) -> text, got {spill!r}")
    child = _as_child(agent)
    memory = _Memory() if keep_history else None

    async def run_subagent(
        task: Annotated[str, Field(min_length=1, description=TASK_DESCRIPTION)],
        idempotency_key: str | None = None,
    ) -> str:
        if not task.strip():
            raise ToolError(
                "the task is empty",
                kind=ToolErrorKind.INVALID_ARGUMENTS,
                hint="Write the task out in full: what to do and what to report.",
            )
        call = current_call()
        parent_run = call.scope.run_id if call is not None else ""
        if memory is None:
            result = await _run(child, name, task, (), _session(name, idempotency_key))
        else:
            conversation = memory.of(parent_run)
            async with conversation.lock:  # one turn at a time in one conversation
                session = f"{name}@{parent_run or uuid.uuid4().hex[:16]}"
                result = await _run(child, name, task, conversation.messages, session)
                if result.ok:
                    conversation.messages = result.messages
        answer = _answer(name, result)
        if spill is not None and len(answer.encode()) > max_answer_bytes:
            return await asyncio.to_thread(spill, answer, name)
        return answer

    return tool(
        name=name,
        description=description.strip(),
        idempotent=False,  # the child may act; its session is keyed by this call's key
        timeout_s=None,  # the child's own wall clock, within the parent's, bounds it
        retries=0,  # a failed child costs tokens: the parent's model decides what next
        max_result_bytes=max_answer_bytes,
    )(run_subagent)


def _as_child(agent: Agent) -> Agent:
    """A copy of `agent` whose system prompt carries the sub-agent rules."""
    parts = agent.instructions
    if not isinstance(parts, PromptParts):
        parts = PromptParts(role=parts.strip() if parts else DEFAULT_ROLE)
    changes: dict[str, object] = {"subagent": True}
    if parts.uncertainty == _ASK_THE_USER:  # a sub-agent has nobody to ask
        changes["uncertainty"] = SUBAGENT_UNCERTAINTY
    child = copy.copy(agent)
    child.system, child.template = render_system_prompt(
        replace(parts, **changes),  # type: ignore[arg-type]
        template=agent.template,
    )
    return child


def _session(name: str, key: str | None) -> str:
    """The child's session: from the parent call's idempotency key, so the child's own
    keys stay the same when that call is run again."""
    suffix = key.removeprefix("pi-")[:24] if key else uuid.uuid4().hex[:16]
    return f"{name}-{suffix}"


async def _run(
    child: Agent, name: str, task: str, history: Sequence[Message], session: str
) -> RunResult:
    try:
        return await child.run(task, history=history, session_id=session)
    except UserError as exc:  # the child could not start (its trace folder; too deep)
        raise ToolError(
            f"sub-agent {name!r} could not start: {clipped(str(exc), _MAX_DETAIL)}",
            kind=ToolErrorKind.SUBAGENT_FAILED,
            hint="Do this part yourself with your own tools, or answer with what you have.",
        ) from None


def _answer(name: str, result: RunResult) -> str:
    """The child's answer as the parent reads it, or the error saying why there is none."""
    if result.status == "completed":
        output = result.output
        return output if isinstance(output, str) else encode_result(output)
    detail = f"sub-agent {name!r} stopped with {result.stop_reason} before answering"
    if result.error:
        detail += f": {clipped(result.error, _MAX_DETAIL)}"
    if result.stop_reason == "security":
        raise SecurityViolation(detail)
    raise ToolError(detail, kind=ToolErrorKind.SUBAGENT_FAILED)
