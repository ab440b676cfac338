"""Eval suites: a TOML file naming an agent and the cases it must pass.

    agent = "agent.toml"          # an agent file, relative to the suite
    [[case]]
    name = "storm-chengdu"
    prompt = "成都 12 月 2 日会下雨吗？下雨的话提醒我带伞。"
    expect_tools = [{ name = "get_weather", arguments = { city = "成都" } },
                    { name = "create_reminder" }]
    forbid_tools = ["delete_all"]
    expect_output = "雨"          # a regex searched in the final answer
    expect_stop = "final_answer"
    script = "scripts/storm.json" # this case's script, for the agent's scripted model

Everything is checked before any case runs: a mistake is one `SuiteError` naming the
file, the case and the key (`suite.toml: case "x": expect_tools[0].name: must be a
string`).

Expected arguments are compared with the JSON arguments of tool calls, so they may hold
only what JSON can: nan and ±inf are refused, and so are TOML date-times and times, whose
text has many spellings (`T` or a space, `Z` or `+00:00`): write them as the string the
tool receives. A TOML date has one spelling, so it becomes that string (`1979-05-27`).
"""

from __future__ import annotations

import datetime
import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..loop.agentfile import parse_toml, read_agent_file
from ..loop.definition import AgentDefinition
from ..messages import StopReason, find_non_finite, repair_text
from ..userfiles import MiB, UserFileError, read_user_text, resolved

STOP_REASONS: tuple[str, ...] = typing.get_args(StopReason)
_SUITE_KEYS = ("agent", "name", "description", "case")
_CASE_KEYS = (
    "name",
    "prompt",
    "expect_tools",
    "forbid_tools",
    "expect_output",
    "expect_stop",
    "script",
)
_CALL_KEYS = ("name", "arguments")
MAX_SUITE_BYTES = 16 * MiB
"""The largest suite file read: thousands of cases, short of a memory blow-up."""


class SuiteError(UserError):
    """A suite file is wrong; the message names the file, the case and the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCall:
    """A tool call a case expects: this tool, with at least these arguments."""

    name: str
    arguments: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One prompt and what its run must (and must not) do."""

    name: str
    prompt: str
    expect_tools: tuple[ExpectedCall, ...] = ()
    forbid_tools: tuple[str, ...] = ()
    expect_output: re.Pattern[str] | None = None
    expect_stop: str | None = None
    script: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """A suite file read and checked: its agent and its cases."""

    name: str
    path: Path
    agent: AgentDefinition
    cases: tuple[Case, ...]


def load_suite(path: str | Path) -> Suite:
    """The suite at `path`, its agent file read; a `SuiteError` for any mistake."""
    file = Path(path).expanduser()
    shown = str(file)
    try:
        data = parse_toml(read_user_text(file, what="suite", max_bytes=MAX_SUITE_BYTES))
    except UserFileError as exc:
        raise SuiteError(f"{shown}: cannot read it: {exc.reason}") from None
    except ValueError as exc:
        raise SuiteError(f"{shown}: not valid TOML: {exc}") from None
    base = file.resolve().parent
    _known(shown, "", data, _SUITE_KEYS)
    agent_ref = data.get("agent")
    if not isinstance(agent_ref, str) or not agent_ref:
        raise SuiteError(f"{shown}: agent: must name an agent file, got {_shown(agent_ref)}")
    agent_file = base / Path(agent_ref).expanduser()
    if not agent_file.is_file():
        raise SuiteError(f"{shown}: agent: no agent file at {agent_file}")
    try:
        agent = read_agent_file(agent_file)
    except UserError as exc:
        raise SuiteError(f"{shown}: agent: {exc}") from None
    name = data.get("name", file.stem)
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{shown}: name: must be a non-empty string, got {_shown(name)}")
    raw_cases = data.get("case")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise SuiteError(f"{shown}: case: the suite needs at least one [[case]] table")
    cases: list[Case] = []
    for index, raw in enumerate(raw_cases):
        case = _case(shown, index, raw, base)
        if any(c.name == case.name for c in cases):
            raise SuiteError(f"{shown}: case {_quoted(case.name)}: name: used by two cases")
        cases.append(case)
    return Suite(name=repair_text(name), path=file, agent=agent, cases=tuple(cases))


def _case(shown: str, index: int, raw: Any, base: Path) -> Case:
    if not isinstance(raw, Mapping):
        raise SuiteError(f"{shown}: case #{index + 1}: must be a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SuiteError(f"{shown}: case #{index + 1}: name: must be a non-empty string")
    name = repair_text(name)
    where = f"{shown}: case {_quoted(name)}: "
    _known(where, "", raw, _CASE_KEYS)
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SuiteError(f"{where}prompt: must be a non-empty string, got {_shown(prompt)}")
    return Case(
        name=name,
        prompt=repair_text(prompt),
        expect_tools=_expected_calls(where, raw.get("expect_tools", [])),
        forbid_tools=_tool_names(where, raw.get("forbid_tools", [])),
        expect_output=_pattern(where, raw.get("expect_output")),
        expect_stop=_stop(where, raw.get("expect_stop")),
        script=_script(where, raw.get("script"), base),
    )


def _expected_calls(where: str, value: Any) -> tuple[ExpectedCall, ...]:
    if not isinstance(value, list):
        raise SuiteError(f"{where}expect_tools: must be a list of tables, got {_shown(value)}")
    calls = []
    for i, item in enumerate(value):
        key = f"expect_tools[{i}]"
        if not isinstance(item, Mapping):
            raise SuiteError(f"{where}{key}: must be a table {{name, arguments}}")
        _known(where, f"{key}.", item, _CALL_KEYS)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise SuiteError(f"{where}{key}.name: must be a string, got {_shown(name)}")
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise SuiteError(f"{where}{key}.arguments: must be a table, got {_shown(arguments)}")
        calls.append(
            ExpectedCall(
                name=name,
                arguments=None if arguments is None else _json_only(where, key, arguments),
            )
        )
    return tuple(calls)


def _json_only(where: str, key: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` as a tool call could hold them: dates as text, nothing JSON lacks."""
    found = find_non_finite(arguments)
    if found is not None:
        path, value = found
        raise SuiteError(
            f"{where}{key}.arguments{_place(path)}: {value!r} is never in a tool call's "
            "JSON arguments"
        )
    spelled: dict[str, Any] = _dates_spelled(where, f"{key}.arguments", dict(arguments))
    return spelled


def _dates_spelled(where: str, key: str, value: Any) -> Any:
    """`value` with TOML dates as their text; a date-time or a time is a SuiteError."""
    if isinstance(value, datetime.datetime | datetime.time):
        kind = "date-time" if isinstance(value, datetime.datetime) else "time"
        raise SuiteError(
            f"{where}{key}: a TOML {kind} is never in a tool call's JSON arguments; "
            "write it as the string the tool receives"
        )
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _dates_spelled(where, key + _place((k,)), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates_spelled(where, key + _place((i,)), v) for i, v in enumerate(value)]
    return value


def _place(path: tuple[str | int, ...]) -> str:
    """`("days", 1)` as `.days[1]`, each key on one line (control characters escaped)."""
    return "".join(f"[{p}]" if isinstance(p, int) else "." + _quoted(p)[1:-1] for p in path)


def _tool_names(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SuiteError(f"{where}forbid_tools: must be a list of tool names, got {_shown(value)}")
    return tuple(value)


def _pattern(where: str, value: Any) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{where}expect_output: must be a regex string, got {_shown(value)}")
    try:
        return re.compile(value)
    except (re.error, OverflowError) as exc:  # a repeat count past what `re` can hold
        raise SuiteError(f"{where}expect_output: not a valid regex: {exc}") from None
    except RecursionError:
        raise SuiteError(f"{where}expect_output: not a valid regex: nested too deeply") from None


def _stop(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if value not in STOP_REASONS:
        raise SuiteError(
            f"{where}expect_stop: must be a stop reason ({', '.join(STOP_REASONS)}), "
            f"got {_shown(value)}"
        )
    return str(value)


def _script(where: str, value: Any, base: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{where}script: must name a script file, got {_shown(value)}")
    try:
        path = resolved(value, base=base, what="script")
    except UserFileError as exc:
        raise SuiteError(f"{where}script: {value}: {exc.reason}") from None
    if not path.is_file():
        raise SuiteError(f"{where}script: no script file at {path}")
    return path


def _known(where: str, prefix: str, table: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        place = where if where.endswith(": ") else f"{where}: "
        raise SuiteError(
            f"{place}{prefix}{_quoted(unknown[0])[1:-1]}: unknown key; known: {', '.join(keys)}"
        )


def _quoted(text: str) -> str:
    """`text` in double quotes with control characters escaped (a name stays one line)."""
    return json.dumps(repair_text(text), ensure_ascii=False)


def _shown(value: Any) -> str:
    return _quoted(value) if isinstance(value, str) else repr(value)[:80]
