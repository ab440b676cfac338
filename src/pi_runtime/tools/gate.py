"""The gate: every tool call the model makes passes here before and after it runs.

Order: unknown tool → permission → truncated call → argument size → JSON → schema →
idempotency key → execute with timeout → classify failures → retry transient ones →
encode and cut the result. A truncated call is checked before its JSON because its JSON
is expected to be broken: the model must hear that its output was cut, not that it wrote
bad JSON. Every outcome is a tool-result message; nothing raises.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import (
    ToolCall,
    ToolErrorKind,
    ToolResultMessage,
    redact,
    repair_text,
    tool_error_info,
    tool_error_result,
)
from .arguments import ArgumentSchema, BadArguments, check_arguments
from .classify import ErrorClass
from .execute import Attempt, call_key, execute
from .result_text import encode_result, truncate_result
from .spec import ToolSpec

K = ToolErrorKind

Launcher = Callable[[ToolCall, ToolSpec, dict[str, Any], str | None], Awaitable[str]]
"""(call, tool, JSON arguments, idempotency key) → job id of the started job."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What became of one tool call: the message for the model and how it got there."""

    call: ToolCall
    message: ToolResultMessage | None
    """None only while a background job computes the result (`job_id` says which)."""
    error_class: ErrorClass | None
    executed: bool
    attempts: tuple[Attempt, ...] = ()
    idempotency_key: str | None = None
    result_bytes: int = 0
    result_truncated: bool = False
    job_id: str | None = None

    @property
    def is_error(self) -> bool:
        return self.message is not None and self.message.is_error


class Gate:
    """Checks, authorizes and runs tool calls for one session.

    Args:
        tools: every tool the agent knows.
        allow: names the agent may call (None: all of `tools`).
        session_id: the conversation the calls belong to (feeds idempotency keys).
        retry_base_s: first backoff delay for transient failures; doubles per attempt.
        retry_max_s: backoff cap.
        launcher: starts a job for a background tool's call and returns its id; without
            one, background tools run inline like any other.
    """

    def __init__(
        self,
        tools: Sequence[ToolSpec],
        *,
        allow: Collection[str] | None = None,
        session_id: str,
        retry_base_s: float = 0.25,
        retry_max_s: float = 8.0,
        rng: random.Random | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.allowed = frozenset(self.tools if allow is None else allow)
        self.session_id = session_id
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self._rng = rng or random.Random()
        self.launcher = launcher
        self._schemas = {t.name: ArgumentSchema.of(t.parameters) for t in tools}

    def narrowed(self, allow: Collection[str]) -> Gate:
        """This gate for a part of a run that may call only `allow` (of what it allows):
        same session, retries and launcher; any other tool is `permission_denied`."""
        gate = copy.copy(self)
        gate.allowed = self.allowed & frozenset(allow)
        return gate

    @property
    def offered(self) -> list[ToolSpec]:
        """The tools the model is told about: the allowed ones."""
        return [t for name, t in self.tools.items() if name in self.allowed]

    async def run_all(self, calls: Sequence[ToolCall]) -> tuple[ToolOutcome, ...]:
        """Run several calls concurrently; outcomes keep the model's order."""
        if len(calls) == 1:
            return (await self.run(calls[0]),)
        return tuple(await asyncio.gather(*(self.run(c) for c in calls)))

    async def run(self, call: ToolCall) -> ToolOutcome:
        spec = self.tools.get(call.name)
        if spec is None:
            names = ", ".join(sorted(self.allowed)) or "(none)"
            return self._refuse(
                call,
                K.UNKNOWN_TOOL,
                f"There is no tool named {call.name!r}. Available tools: {names}.",
            )
        if call.name not in self.allowed:
            return self._refuse(
                call,
                K.PERMISSION_DENIED,
                f"Tool {call.name!r} is not allowed for this agent.",
            )
        if call.truncated:
            return self._refuse(
                call,
                K.TRUNCATED_CALL,
                "This call was cut off by the output limit before its arguments were complete; it was not executed.",
            )
        raw = repair_text(call.raw)  # an adapter may pass on half of a split pair
        size = len(raw.encode())
        if size > spec.max_arg_bytes:
            return self._refuse(
                call,
                K.ARGUMENTS_TOO_LARGE,
                f"Arguments are {size} bytes; {call.name!r} accepts at most {spec.max_arg_bytes}.",
            )
        # The raw text is the truth: parse it here, whatever an adapter pre-parsed.
        checked = check_arguments(spec, self._schemas[spec.name], raw)
        if isinstance(checked, BadArguments):
            return self._refuse(call, K.INVALID_ARGUMENTS, checked.message, checked.hint)
        arguments, kwargs = checked.arguments, checked.kwargs
        key = call_key(spec, self.session_id, call.id)
        if spec.background and self.launcher is not None:
            job_id = await self.launcher(call, spec, arguments, key)
            return ToolOutcome(
                call=call,
                message=None,
                error_class=None,
                executed=False,
                idempotency_key=key,
                job_id=job_id,
            )
        done = await execute(
            spec,
            kwargs,
            key=key,
            session_id=self.session_id,
            convert=encode_result,  # a result that cannot be encoded is the tool's failure
            retry_base_s=self.retry_base_s,
            retry_max_s=self.retry_max_s,
            rng=self._rng,
        )
        if done.error is not None:
            return ToolOutcome(
                call=call,
                message=tool_error_result(call.id, call.name, done.error),
                error_class=done.error_class,
                executed=True,
                attempts=done.attempts,
                idempotency_key=key,
            )
        text, total, cut = truncate_result(done.value, spec.max_result_bytes)  # encoded by convert
        return ToolOutcome(
            call=call,
            message=ToolResultMessage(tool_call_id=call.id, name=call.name, content=text),
            error_class=None,
            executed=True,
            attempts=done.attempts,
            idempotency_key=key,
            result_bytes=total,
            result_truncated=cut,
        )

    def _refuse(
        self, call: ToolCall, kind: ToolErrorKind, message: str, hint: str | None = None
    ) -> ToolOutcome:
        # schema errors quote the arguments, which may quote what the model was shown
        info = tool_error_info(kind, redact(repair_text(message)), hint)
        result = tool_error_result(call.id, call.name, info)
        return ToolOutcome(call=call, message=result, error_class="semantic", executed=False)
