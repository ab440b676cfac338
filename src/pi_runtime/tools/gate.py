"""The gate: every tool call the model makes passes here before and after it runs.

Order: unknown tool → permission → truncated call → argument size → JSON → schema →
idempotency key → execute with timeout → classify failures → retry transient ones →
encode and cut the result. A truncated call is checked before its JSON because its JSON
is expected to be broken: the model must hear that its output was cut, not that it wrote
bad JSON. Every outcome is a tool-result message; nothing raises.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from ..messages import ToolCall, ToolErrorInfo, ToolResultMessage, redact, repair_text
from .arguments import BadArguments, check_arguments
from .classify import ErrorClass, classify, hint_for
from .result_text import encode_result, truncate_result
from .spec import IDEMPOTENCY_PARAM, SESSION_PARAM, ToolSpec

Launcher = Callable[[ToolCall, ToolSpec, dict[str, Any], str | None], Awaitable[str]]
"""(call, tool, JSON arguments, idempotency key) → job id of the started job."""


def idempotency_key(session_id: str, tool_call_id: str) -> str:
    """Stable key for one tool call of one session: the same across retries and restarts."""
    seed = repair_text(f"{session_id}\x1f{tool_call_id}")  # ids come from outside
    return f"pi-{hashlib.sha256(seed.encode()).hexdigest()[:40]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One execution attempt of a tool call."""

    number: int
    duration_ms: float
    error_class: ErrorClass | None = None
    error: ToolErrorInfo | None = None
    retry_in_ms: float | None = None


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
        self._validators = {t.name: Draft202012Validator(t.parameters) for t in tools}

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
                "unknown_tool",
                f"There is no tool named {call.name!r}. Available tools: {names}.",
                "Call one of the available tools by its exact name.",
            )
        if call.name not in self.allowed:
            return self._refuse(
                call,
                "permission_denied",
                f"Tool {call.name!r} is not allowed for this agent.",
                hint_for("permission_denied"),
            )
        if call.truncated:
            return self._refuse(
                call,
                "truncated_call",
                "This call was cut off by the output limit before its arguments were complete; it was not executed.",
                "Call again with shorter arguments, or pass large data by reference.",
            )
        raw = repair_text(call.raw)  # an adapter may pass on half of a split pair
        size = len(raw.encode())
        if size > spec.max_arg_bytes:
            return self._refuse(
                call,
                "arguments_too_large",
                f"Arguments are {size} bytes; {call.name!r} accepts at most {spec.max_arg_bytes}.",
                "Send less data: pass a reference or an identifier instead of the content.",
            )
        # The raw text is the truth: parse it here, whatever an adapter pre-parsed.
        checked = check_arguments(spec, self._validators[spec.name], raw)
        if isinstance(checked, BadArguments):
            return self._refuse(call, "invalid_arguments", checked.message, checked.hint)
        arguments, kwargs = checked.arguments, checked.kwargs
        key = None if spec.idempotent else idempotency_key(self.session_id, call.id)
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
        if spec.takes_idempotency_key:
            kwargs[IDEMPOTENCY_PARAM] = key
        if spec.takes_session_id:
            kwargs[SESSION_PARAM] = self.session_id
        return await self._execute(spec, call, kwargs, key)

    async def _execute(
        self, spec: ToolSpec, call: ToolCall, kwargs: dict[str, Any], key: str | None
    ) -> ToolOutcome:
        attempts: list[Attempt] = []
        number = 0
        while True:
            number += 1
            started = time.perf_counter()
            try:
                # encoding is inside: a result that cannot be encoded is the tool's failure
                text = encode_result(await _invoke(spec, kwargs))
            except Exception as exc:
                elapsed = (time.perf_counter() - started) * 1000
                if (
                    isinstance(exc, TimeoutError)
                    and spec.timeout_s is not None
                    and elapsed >= spec.timeout_s * 1000 * 0.99
                ):
                    exc = TimeoutError(f"{call.name!r} did not finish within {spec.timeout_s:g}s")
                cls, info = classify(exc)
                retry = cls == "transient" and number <= spec.retries
                delay = self._backoff(number) if retry else None
                attempts.append(
                    Attempt(
                        number=number,
                        duration_ms=elapsed,
                        error_class=cls,
                        error=info,
                        retry_in_ms=None if delay is None else delay * 1000,
                    )
                )
                if retry and delay is not None:
                    await asyncio.sleep(delay)
                    continue
                message = ToolResultMessage(
                    tool_call_id=call.id,
                    name=call.name,
                    content=_error_text(info),
                    is_error=True,
                    error=info,
                )
                return ToolOutcome(
                    call=call,
                    message=message,
                    error_class=cls,
                    executed=True,
                    attempts=tuple(attempts),
                    idempotency_key=key,
                )
            elapsed = (time.perf_counter() - started) * 1000
            attempts.append(Attempt(number=number, duration_ms=elapsed))
            text, total, cut = truncate_result(text, spec.max_result_bytes)
            message = ToolResultMessage(tool_call_id=call.id, name=call.name, content=text)
            return ToolOutcome(
                call=call,
                message=message,
                error_class=None,
                executed=True,
                attempts=tuple(attempts),
                idempotency_key=key,
                result_bytes=total,
                result_truncated=cut,
            )

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: half fixed, half random ("equal jitter")."""
        ceiling = min(self.retry_max_s, self.retry_base_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def _refuse(self, call: ToolCall, kind: str, message: str, hint: str) -> ToolOutcome:
        # schema errors quote the arguments, which may quote what the model was shown
        info = ToolErrorInfo(kind=kind, message=redact(repair_text(message)), hint=hint)
        result = ToolResultMessage(
            tool_call_id=call.id,
            name=call.name,
            content=_error_text(info),
            is_error=True,
            error=info,
        )
        return ToolOutcome(call=call, message=result, error_class="semantic", executed=False)


def _error_text(info: ToolErrorInfo) -> str:
    return json.dumps(
        {"kind": info.kind, "message": info.message, "hint": info.hint}, ensure_ascii=False
    )


async def _invoke(spec: ToolSpec, kwargs: dict[str, Any]) -> Any:
    # Sync tools run in a worker thread so a slow one cannot stall the event loop.
    work = spec.function(**kwargs) if spec.is_async else asyncio.to_thread(spec.function, **kwargs)
    if spec.timeout_s is None:
        return await work
    return await asyncio.wait_for(work, spec.timeout_s)
