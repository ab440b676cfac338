"""`Guardrails`, the checks at a run's transition points, and `screen`, which runs one
point's chain over a value and says what became of it.

Checks run in order. A `Rewrite`'s value is what the next one sees; the first `Deny`
stops the chain; a check that raises, returns anything but a verdict, or rewrites into a
value the point cannot take stops it too (fail closed). Every verdict but `Allow` is
kept as a `Trip`, the audit record the run writes to its trace.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ..exceptions import UserError
from ..messages import redact, repair_text
from .verdicts import Allow, Deny, Guardrail, Rewrite, Verdict, guardrail_name

Stage: TypeAlias = Literal["input", "output", "tool"]
TripVerdict: TypeAlias = Literal["deny", "rewrite", "error"]

REASON_LIMIT = 300
"""Characters of a reason kept in the trace (and, for a tool call, shown to the model)."""
EXCERPT_LIMIT = 120
"""Characters of a refused value kept in the trace: enough to tell what it was."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guardrails:
    """Which checks guard which point of a run.

    Attributes:
        input: checks of the user's message, before the model sees it. A deny ends the
            run `security`, and the message does not join the conversation.
        output: checks of the final answer (text, or the output contract's object). A
            deny ends the run `security` without output.
        tools: per tool name, checks of a call's arguments after they match the tool's
            schema and before it runs. A deny refuses the call (`permission_denied`, with
            the reason for the model, which may try otherwise); a rewrite is checked
            against the schema again.
    """

    input: Sequence[Guardrail] = ()
    output: Sequence[Guardrail] = ()
    tools: Mapping[str, Sequence[Guardrail]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input", _chain("input", self.input))
        object.__setattr__(self, "output", _chain("output", self.output))
        if not isinstance(self.tools, Mapping):
            raise UserError(f"guardrails tools must map tool names to checks, got {self.tools!r}")
        tools: dict[str, tuple[Guardrail, ...]] = {}
        for name, checks in self.tools.items():
            if not isinstance(name, str) or not name:
                raise UserError(f"guardrails tools are keyed by tool name, got {name!r}")
            tools[name] = _chain(f"tools[{name!r}]", checks)
        object.__setattr__(self, "tools", MappingProxyType(tools))

    def __bool__(self) -> bool:
        return bool(self.input or self.output or any(self.tools.values()))


def _chain(key: str, value: Any) -> tuple[Guardrail, ...]:
    checks = (value,) if callable(value) else value
    if isinstance(checks, str | bytes | Mapping) or not isinstance(checks, Sequence):
        raise UserError(f"guardrails {key} must be a list of callables, got {value!r}")
    for check in checks:
        if not callable(check):
            raise UserError(f"guardrails {key}: {check!r} is not callable")
    return tuple(checks)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trip:
    """A guardrail that did not simply allow: the audit record of what it decided.

    `reason` and `excerpt` are bounded and have secrets redacted; `excerpt` (the start
    of the refused value) is kept for refusals and failures only, never for rewrites.
    """

    guardrail: str
    stage: Stage
    verdict: TripVerdict
    reason: str
    tool: str | None = None
    tool_call_id: str | None = None
    excerpt: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Screened:
    """A chain's outcome: the value to go on with, every trip, and the one that stopped
    it (a deny or an error; None: the value passes)."""

    value: Any
    trips: tuple[Trip, ...] = ()
    stopped: Trip | None = None


async def screen(
    chain: Sequence[Guardrail],
    value: Any,
    *,
    stage: Stage,
    accept: Callable[[Any], Any] | None = None,
    tool: str | None = None,
    tool_call_id: str | None = None,
) -> Screened:
    """Run `chain` over `value`; never raises (but for cancellation).

    Args:
        accept: takes a rewritten value and returns it as the point uses it, or raises
            (TypeError, ValueError) when the point cannot take it.
    """
    trips: list[Trip] = []

    def trip(check: Guardrail, verdict: TripVerdict, reason: str, shown: Any = None) -> Trip:
        made = Trip(
            guardrail=guardrail_name(check),
            stage=stage,
            verdict=verdict,
            reason=bounded(reason, REASON_LIMIT),
            tool=tool,
            tool_call_id=tool_call_id,
            excerpt=None if verdict == "rewrite" else bounded(_text(shown), EXCERPT_LIMIT),
        )
        trips.append(made)
        return made

    for check in chain:
        try:
            verdict: Verdict | Any = check(value)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            stop = trip(check, "error", f"the guardrail raised {type(exc).__name__}: {exc}", value)
            return Screened(value=value, trips=tuple(trips), stopped=stop)
        if isinstance(verdict, Allow):
            continue
        if isinstance(verdict, Deny):
            stop = trip(check, "deny", verdict.reason, value)
            return Screened(value=value, trips=tuple(trips), stopped=stop)
        if not isinstance(verdict, Rewrite):
            problem = f"the guardrail returned {type(verdict).__name__}, not Allow, Deny or Rewrite"
            stop = trip(check, "error", problem, value)
            return Screened(value=value, trips=tuple(trips), stopped=stop)
        try:
            rewritten = verdict.value if accept is None else accept(verdict.value)
        except Exception as exc:
            problem = f"the guardrail rewrote the value into one that is refused: {exc}"
            stop = trip(check, "error", problem, value)
            return Screened(value=value, trips=tuple(trips), stopped=stop)
        trip(check, "rewrite", verdict.reason or "rewritten")
        value = rewritten
    return Screened(value=value, trips=tuple(trips))


def bounded(text: str, limit: int) -> str:
    """`text` with secrets redacted, cut to `limit` characters (an ellipsis says so)."""
    # cut loosely first, so redaction never scans a huge value; then exactly
    clean = redact(repair_text(text[: limit * 4]))
    return clean if len(clean) <= limit and len(text) <= limit * 4 else clean[: limit - 1] + "…"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # a cycle, or a value no JSON spells
        return repr(value)
