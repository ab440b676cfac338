"""Scoring one run against its case: a list of failures, empty when the case passed.

- `expect_tools`: each expected call must appear among the calls that succeeded (a tool
  result without an error), **in the listed order** — an in-order subsequence: other
  calls may come before, between and after. A refused or failed call does not count, so
  a call with the right name but arguments the gate rejected is not a pass.
- Arguments are a subset match: every expected key must be there with an equal value;
  tables nest (subset again), lists match item by item and in length. Numbers compare
  canonically (`5` equals `5.0`), true/false never equal 1/0, strings exactly.
- `forbid_tools`: any call the model made to one of them fails the case, refused or not:
  it tried.
- `expect_output`: a regex searched in the final answer (a contract's object as JSON), in
  time linear in the answer unless it needs lookaround or a backreference; those are
  searched for at most `SEARCH_TIMEOUT_S`, and a search that gives up fails the case.
- `expect_stop`: the run's stop reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..loop import RunResult
from ..messages import AssistantMessage, ToolCall, ToolResultMessage, clipped, parse_object
from ..messages.canonical import canonical_json, canonical_value
from ..tools.linear_pattern import SEARCH_TIMEOUT_S, is_linear, matcher
from .suite import Case, ExpectedCall

_SHOWN_CHARS = 160
"""What a failure line quotes of an answer or an error."""


def calls_made(result: RunResult) -> list[tuple[ToolCall, bool]]:
    """Every tool call of the run in order, with whether its result was an error."""
    errors = {
        m.tool_call_id: m.is_error for m in result.messages if isinstance(m, ToolResultMessage)
    }
    return [
        (call, errors.get(call.id, False))
        for message in result.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]


def score(case: Case, result: RunResult) -> list[str]:
    """What `result` got wrong for `case`, one sentence each."""
    failures: list[str] = []
    calls = calls_made(result)
    succeeded = [call for call, failed in calls if not failed]
    position = 0
    for index, expected in enumerate(case.expect_tools):
        found = _find(expected, succeeded, position)
        if found is None:
            failures.append(_missing(index, expected, succeeded, position))
            continue
        position = found + 1
    tried = [call.name for call, _ in calls]
    for name in case.forbid_tools:
        if name in tried:
            failures.append(f"forbidden tool {name} was called {tried.count(name)} time(s)")
    if case.expect_output is not None:
        answer = _answer_text(result.output)
        if answer is None:
            failures.append(f"expect_output /{case.expect_output.pattern}/: no final answer")
        else:
            try:
                found = _found(case.expect_output, answer)
            except TimeoutError:
                failures.append(
                    f"expect_output /{case.expect_output.pattern}/: the search gave up after "
                    f"{SEARCH_TIMEOUT_S:g} s on an answer of {len(answer)} characters (the "
                    "pattern backtracks: write it without lookaround or backreferences)"
                )
            else:
                if not found:
                    failures.append(
                        f"expect_output /{case.expect_output.pattern}/ not found in the "
                        f"answer: {clipped(answer, _SHOWN_CHARS)}"
                    )
    if case.expect_stop is not None and result.stop_reason != case.expect_stop:
        detail = f" ({clipped(result.error, _SHOWN_CHARS)})" if result.error else ""
        failures.append(f"expect_stop {case.expect_stop}: stopped {result.stop_reason}{detail}")
    return failures


def arguments_match(expected: Any, actual: Any) -> bool:
    """Whether `actual` holds everything `expected` says (a subset match, see above)."""
    return _match(canonical_value(expected), canonical_value(actual))


def _match(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _match(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_match(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    if call.arguments is not None:
        return call.arguments
    return parse_object(call.raw)[0]


def _find(expected: ExpectedCall, calls: list[ToolCall], start: int) -> int | None:
    for index in range(start, len(calls)):
        call = calls[index]
        if call.name != expected.name:
            continue
        if expected.arguments is None or arguments_match(expected.arguments, _arguments(call)):
            return index
    return None


def _missing(index: int, expected: ExpectedCall, calls: list[ToolCall], start: int) -> str:
    wanted = expected.name
    if expected.arguments is not None:
        wanted += " " + canonical_json(expected.arguments)
    same = [c for c in calls[start:] if c.name == expected.name]
    if same:
        seen = "; ".join(canonical_json(_arguments(c)) for c in same[:3])
        return f"expect_tools[{index}]: no {wanted} call; {expected.name} was called with {seen}"
    if any(c.name == expected.name for c in calls[:start]):
        return f"expect_tools[{index}]: no {wanted} call after the calls expected before it"
    return f"expect_tools[{index}]: {expected.name} was never called successfully"


def _found(pattern: re.Pattern[str], answer: str) -> bool:
    """Whether `pattern` matches somewhere in `answer`, as `re.search` would: in time
    linear in the answer, which a model writes (`re` backtracked 11 s on 28 `a`s and a
    `!` for `^(a+)+$`). A pattern with lookaround or a backreference, or compiled with
    flags, backtracks: it is searched for at most `SEARCH_TIMEOUT_S` (TimeoutError after).
    """
    flags = pattern.flags & ~re.UNICODE
    found = matcher(pattern.pattern, flags)
    if flags or not is_linear(pattern.pattern):
        return found(answer)
    # `$` matches before a final line break too in `re`, only at the very end in the other
    return found(answer) or (answer.endswith("\n") and found(answer[:-1]))


def _answer_text(output: Any) -> str | None:
    if output is None:
        return None
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False)
