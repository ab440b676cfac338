"""The gate: every tool call the model makes passes here before and after it runs.

Order: unknown tool → permission → truncated call → argument size → JSON → schema →
tool guardrails (a rewrite is checked against the schema again) → approval (a call needing
one stops here, pending, with the arguments a person reviews) → idempotency key → execute
with timeout → classify failures → retry transient ones → encode and cut the result. A
truncated call is checked before its JSON because its JSON is expected to be broken: the
model must hear that its output was cut, not that it wrote bad JSON. Every outcome is a
tool-result message; nothing raises.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..guardrails import Guardrails, Trip, screen
from ..messages import (
    ToolCall,
    ToolErrorKind,
    ToolResultMessage,
    quick_init,
    redact,
    repair_text,
    tool_error_info,
    tool_error_result,
)
from .approval import PendingApproval
from .arguments import ArgumentSchema, BadArguments, GoodArguments, check_arguments
from .classify import ErrorClass
from .execute import Attempt, call_key, execute
from .result_text import encode_tool_result, truncate_result
from .scope import calling
from .spec import ToolSpec

K = ToolErrorKind

Launcher = Callable[[ToolCall, ToolSpec, dict[str, Any], str | None], Awaitable[str]]
"""(call, tool, JSON arguments, idempotency key) → job id of the started job."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What became of one tool call: the message for the model and how it got there."""

    call: ToolCall
    message: ToolResultMessage | None
    """None only while a background job computes the result (`job_id` says which) or a
    person has yet to approve the call (`approval`)."""
    error_class: ErrorClass | None
    executed: bool
    attempts: tuple[Attempt, ...] = ()
    idempotency_key: str | None = None
    result_bytes: int = 0
    result_truncated: bool = False
    job_id: str | None = None
    approval: PendingApproval | None = None
    trips: tuple[Trip, ...] = ()
    """What the call's guardrails refused or rewrote (the loop writes them as events)."""

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
        approval: names of tools whose calls wait for a person's approval (besides those
            marked `requires_approval`).
        guardrails: their `tools` checks guard the calls of the tools they name.
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
        approval: Collection[str] = (),
        guardrails: Guardrails | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.approval = frozenset(approval) | {t.name for t in tools if t.requires_approval}
        self.allowed = frozenset(self.tools if allow is None else allow)
        self.session_id = session_id
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self._rng = rng  # None: the random module's own (seeding one a run cost ~10 µs)
        self.launcher = launcher
        self._schemas = {t.name: ArgumentSchema.of(t.parameters) for t in tools}
        self._guards = {n: c for n, c in (guardrails.tools if guardrails else {}).items() if c}

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

    async def run(self, call: ToolCall, *, approved: bool = False) -> ToolOutcome:
        """The outcome of `call`; `approved`: a person approved it (it runs, if it passes
        the checks, even when its tool needs approval)."""
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
        trips: tuple[Trip, ...] = ()
        if spec.name in self._guards:
            guarded = await self._guard(call, spec, arguments)
            if isinstance(guarded, ToolOutcome):
                return guarded
            if guarded is not None:
                trips, arguments, kwargs = guarded
        if not approved and spec.name in self.approval:
            return ToolOutcome(
                call=call,
                message=None,
                error_class=None,
                executed=False,
                approval=PendingApproval.of(call.id, call.name, arguments),
                trips=trips,
            )
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
                trips=trips,
            )
        with calling(call.id):  # a run the tool starts is this call's child
            done = await execute(
                spec,
                kwargs,
                key=key,
                session_id=self.session_id,
                convert=encode_tool_result,  # a result that cannot be encoded: the tool's failure
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
                trips=trips,
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
            trips=trips,
        )

    async def _guard(
        self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any]
    ) -> ToolOutcome | tuple[tuple[Trip, ...], dict[str, Any], dict[str, Any]] | None:
        """The call's guardrails over its checked arguments: None when all allow, (trips,
        arguments, kwargs) to run it with after a rewrite, or the refusal (a deny:
        `permission_denied`; a guardrail failing: `security`, which stops the run)."""
        schema = self._schemas[spec.name]
        accepted: list[GoodArguments] = []

        def accept(value: Any) -> dict[str, Any]:
            again = check_arguments(spec, schema, json.dumps(value, ensure_ascii=False))
            if isinstance(again, BadArguments):
                raise ValueError(again.message)
            accepted.append(again)
            return again.arguments

        done = await screen(
            self._guards[spec.name],
            copy.deepcopy(arguments),  # a check that edits its argument in place edits a copy
            stage="tool",
            accept=accept,
            tool=call.name,
            tool_call_id=call.id,
        )
        stop = done.stopped
        if stop is None:
            if not accepted:  # every check allowed the call as the model made it
                return None
            return done.trips, accepted[-1].arguments, accepted[-1].kwargs
        if stop.verdict == "deny":
            message = f"Guardrail {stop.guardrail} refused these arguments: {stop.reason}"
            hint = "Change the call to meet that rule, try another way, or tell the user."
            outcome = self._refuse(call, K.PERMISSION_DENIED, message, hint)
        else:
            message = f"Guardrail {stop.guardrail} failed, so the call was not run."
            outcome = self._refuse(call, K.SECURITY, message, error_class="security")
        return replace(outcome, trips=done.trips)

    def _refuse(
        self,
        call: ToolCall,
        kind: ToolErrorKind,
        message: str,
        hint: str | None = None,
        *,
        error_class: ErrorClass = "semantic",
    ) -> ToolOutcome:
        # schema errors quote the arguments, which may quote what the model was shown
        info = tool_error_info(kind, redact(repair_text(message)), hint)
        result = tool_error_result(call.id, call.name, info)
        return ToolOutcome(call=call, message=result, error_class=error_class, executed=False)
