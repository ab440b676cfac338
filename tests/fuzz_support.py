"""Hostile model replies and recording tools for the fuzz test of `Agent`.

Everything is drawn from one `random.Random`, so a run's replies are rebuilt exactly from
its seed. The tools declare constraints in their type hints and record every call that
reaches them; `violations` checks a recorded call against those same constraints, so a
constraint the runtime dropped shows up as an execution it should have refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Annotated, Any, Literal

from pydantic import Field

from pi_runtime import ModelResponse, TextBlock, ThinkingBlock, ToolCall, Usage, tool
from pi_runtime.messages import Block, FinishReason, has_surrogates, parse_object

# The declared constraints, written once: the tools' hints and the checks both use them.
LEVEL_MIN, LEVEL_MAX = 0, 10
LABEL_MAX = 20
LABEL_PATTERN = r"^[a-z][a-z0-9_-]*$"
FACTOR_GT, FACTOR_LE = 0.0, 100.0
TO_MIN, TO_MAX = 1, 20
BODY_MAX = 200
ITEMS_MIN, ITEMS_MAX, ITEM_MAX = 1, 5, 8
KINDS = ("surrogates", "pair", "separators", "huge", "markup", "mapping")


@dataclass(slots=True)
class Execution:
    """One call that reached a tool's body: its run (session), and the finish reason of the
    reply its run was acting on."""

    tool: str
    session: str
    arguments: dict[str, Any]
    finish_reason: str | None


@dataclass(slots=True)
class Ledger:
    """What the tools saw. Append-only: a call that outlives its run still lands here, under
    its own session, so it cannot be mistaken for a call of the run that is going on."""

    executions: list[Execution] = field(default_factory=list)
    finish_reasons: dict[str, str | None] = field(default_factory=dict)
    """session → finish reason of the reply the model gave it last."""

    def record(self, name: str, session_id: str, **arguments: Any) -> None:
        finish = self.finish_reasons.get(session_id)
        self.executions.append(Execution(name, session_id, arguments, finish))


LEDGER = Ledger()


@tool
async def set_level(
    level: Annotated[int, Field(ge=LEVEL_MIN, le=LEVEL_MAX)],
    label: Annotated[str, Field(max_length=LABEL_MAX, pattern=LABEL_PATTERN)] = "main",
    session_id: str = "",
) -> str:
    """Set the level of a dial.

    Args:
        level: the new level.
        label: which dial.
    """
    LEDGER.record("set_level", session_id, level=level, label=label)
    return f"{label} set to {level}"


@tool
async def scale(
    x: float,
    factor: Annotated[float, Field(gt=FACTOR_GT, le=FACTOR_LE)] = 1.0,
    session_id: str = "",
) -> float:
    """Multiply a number."""
    LEDGER.record("scale", session_id, x=x, factor=factor)
    return x * factor


@tool(idempotent=False)
async def send_note(
    to: Annotated[str, Field(min_length=TO_MIN, max_length=TO_MAX)],
    body: Annotated[str, Field(max_length=BODY_MAX)],
    idempotency_key: str | None = None,
    session_id: str = "",
) -> dict[str, Any]:
    """Send a note (a side effect)."""
    LEDGER.record("send_note", session_id, to=to, body=body, idempotency_key=idempotency_key)
    return {"sent": True, "to": to}


@tool
async def tag_items(
    items: Annotated[
        list[Annotated[str, Field(max_length=ITEM_MAX)]],
        Field(min_length=ITEMS_MIN, max_length=ITEMS_MAX),
    ],
    session_id: str = "",
) -> int:
    """Tag some items."""
    LEDGER.record("tag_items", session_id, items=items)
    return len(items)


@tool
async def explode(reason: str = "", session_id: str = "") -> str:
    """Always fails, with a hostile message."""
    LEDGER.record("explode", session_id, reason=reason)
    raise RuntimeError(f"exploded: {reason[:50]} \ud800 \u2028 [/] \x00")


HOSTILE_RESULTS: dict[str, Any] = {
    "surrogates": "a\ud800b\udfffc\udc00\ud800",
    "pair": "\ud83d\ude00 split pair",
    "separators": "x\u2028y\u2029z\u0085w\r\nv\x00u\x1c\x1d\x1e\x0b\x0c",
    "huge": "Z" * 200_000,
    "markup": "[/][bold red]x[/bold red]</tool_result>\x1b[31m",
    "mapping": {"\ud800": "\udfff", "nan": math.nan, "inf": math.inf, "sep": "\u2028"},
}


@tool
def hostile_text(
    kind: Literal["surrogates", "pair", "separators", "huge", "markup", "mapping"],
    session_id: str = "",
) -> Any:
    """Return text no encoder likes (sync: runs in a worker thread)."""
    LEDGER.record("hostile_text", session_id, kind=kind)
    return HOSTILE_RESULTS[kind]


TOOLS = [set_level, scale, send_note, tag_items, explode, hostile_text]
TOOL_NAMES = [t.name for t in TOOLS]

COVERAGE_TAGS = frozenset(
    {
        "bad_name",
        "deep_100",
        "deep_10000",
        "flagged_without_length",
        "garbage",
        "hostile_id",
        "hostile_text",
        "huge_args",
        "huge_text",
        "length_finish",
        "length_unflagged",
        "many_calls",
        "nonfinite_or_raw_number",
        "raw_surrogate_in_raw",
        "script_step",
        "separator_in_raw",
        "truncated_json",
    }
)
"""Kinds of hostility a fuzz of a thousand replies must have delivered at least once."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def violations(e: Execution) -> list[tuple[str, str]]:
    """(category, detail) for every way `e` breaks what its tool declared."""
    a = e.arguments
    bad: list[str] = []
    if e.tool == "set_level":
        lv, lb = a["level"], a["label"]
        if not (_is_int(lv) and LEVEL_MIN <= lv <= LEVEL_MAX):
            bad.append(f"level={lv!r}")
        if not (isinstance(lb, str) and len(lb) <= LABEL_MAX and re.fullmatch(LABEL_PATTERN, lb)):
            bad.append(f"label={lb!r:.60}")
    elif e.tool == "scale":
        if not _is_number(a["x"]):
            bad.append(f"x={a['x']!r}")
        f = a["factor"]
        if not (_is_number(f) and FACTOR_GT < f <= FACTOR_LE):
            bad.append(f"factor={f!r}")
    elif e.tool == "send_note":
        to, body, key = a["to"], a["body"], a["idempotency_key"]
        if not (isinstance(to, str) and TO_MIN <= len(to) <= TO_MAX):
            bad.append(f"to={to!r:.60}")
        if not (isinstance(body, str) and len(body) <= BODY_MAX):
            bad.append(f"body of {len(body)} chars")
        if not (isinstance(key, str) and key):
            bad.append(f"idempotency_key={key!r}")
    elif e.tool == "tag_items":
        items = a["items"]
        if not (isinstance(items, list) and ITEMS_MIN <= len(items) <= ITEMS_MAX):
            bad.append(f"{len(items)} items")
        elif not all(isinstance(i, str) and len(i) <= ITEM_MAX for i in items):
            bad.append(f"items={items!r:.60}")
    elif e.tool == "hostile_text" and a["kind"] not in KINDS:
        bad.append(f"kind={a['kind']!r:.40}")
    found = [("constraint_violation", f"{e.tool}: {', '.join(bad)}")] if bad else []
    floats = [v for v in a.values() if isinstance(v, float) and not math.isfinite(v)]
    if floats:
        found.append(("nonfinite_float_received", f"{e.tool}: {floats!r}"))
    if any(has_surrogates(s) for s in _strings(a)):
        found.append(("surrogate_received", f"{e.tool}: {ascii(a)[:80]}"))
    if e.finish_reason == "length":
        found.append(("length_reply_executed", f"{e.tool} ran for a reply cut off by length"))
    return found


# --- generators -------------------------------------------------------------------------

HOSTILE_STRINGS = (
    "\ud800",
    "\udfff",
    "a\udc00b",
    "\udc00\ud800",
    "\ud83d\ude00",
    "😀",
    "\u2028",
    "\u2029",
    "\u0085",
    "\x00",
    "nul\x00byte",
    "\x1b[31mred\x1b[0m",
    "[/]",
    "[bold red]x[/]",
    "</tool_call>",
    "\u202eevil",
    "\u200b",
    "\ufeff",
    "e\u0301",
    "北京",
    "\r\n",
    "abc\n",
    "\\ud800",
    '{"json": true}',
    "NaN",
    "",
)

# Raw JSON tokens json.dumps would never write; placeholders are swapped for them.
RAW_TOKENS = ("1e999", "-1e999", "1E400", "-0", "NaN", "Infinity", "-Infinity", "1.0e-400")


def hostile(rng: Random) -> str:
    s = "".join(rng.choice(HOSTILE_STRINGS) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.3:
        s = f"text {s} more"
    if rng.random() < 0.05:
        s *= rng.randint(100, 3000)
    return s


def _word(rng: Random, lo: int, hi: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    return "".join(rng.choices(alphabet, k=rng.randint(lo, hi)))


def _raw(rng: Random, raws: list[str]) -> str:
    raws.append(rng.choice(RAW_TOKENS))
    return f"@@RAW{len(raws) - 1}@@"


def _odd(rng: Random, raws: list[str]) -> Any:
    """A value of the wrong kind for almost any parameter."""
    return rng.choice(
        [
            None,
            True,
            "5",
            [5],
            {},
            {"nested": [1, {"x": None}]},
            math.nan,
            math.inf,
            -math.inf,
            10**20,
            -(2**63),
            5.5,
            hostile(rng),
            _raw(rng, raws),
        ]
    )


def _value(rng: Random, tool_name: str, param: str, raws: list[str]) -> Any:
    """A value for one parameter: usually valid, often at or past a bound, sometimes wrong."""
    roll = rng.random()
    if roll < 0.15:
        return _odd(rng, raws)
    valid = roll < 0.65
    if param == "level":
        return rng.randint(LEVEL_MIN, LEVEL_MAX) if valid else rng.choice([-1, 11, 0, 10, 5.0, 99])
    if param == "label":
        if valid:
            return _word(rng, 1, LABEL_MAX)
        return rng.choice(["", "A", "9lives", "abc\n", _word(rng, 21, 80), "x\u2028", "ab c"])
    if param == "x":
        return rng.uniform(-1e6, 1e6) if valid else rng.choice([0, -0.0, 1e308, -1e308, "1.5"])
    if param == "factor":
        return rng.uniform(0.001, FACTOR_LE) if valid else rng.choice([0, -1, 100.0001, 1e308])
    if param == "to":
        return _word(rng, TO_MIN, TO_MAX) if valid else rng.choice(["", _word(rng, 21, 300)])
    if param == "body":
        return _word(rng, 0, BODY_MAX, "ab c") if valid else _word(rng, 201, 5000)
    if param == "items":
        if valid:
            return [_word(rng, 0, ITEM_MAX) for _ in range(rng.randint(ITEMS_MIN, ITEMS_MAX))]
        return rng.choice([[], ["a"] * 6, ["ninechars"], [1, 2], [["a"]], [hostile(rng)]])
    if param == "kind":
        return rng.choice(KINDS) if valid else rng.choice(["HUGE", "", "surrogate"])
    return hostile(rng) if not valid else _word(rng, 0, 30)  # reason, unknown parameters


PARAMS: dict[str, tuple[str, ...]] = {
    "set_level": ("level", "label"),
    "scale": ("x", "factor"),
    "send_note": ("to", "body"),
    "tag_items": ("items",),
    "explode": ("reason",),
    "hostile_text": ("kind",),
}


def _nested(depth: int, rng: Random) -> str:
    if rng.random() < 0.5:
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def _typed(rng: Random, name: str, tags: set[str]) -> str:
    """A JSON object for tool `name`'s parameters, with hostile values mixed in."""
    raws: list[str] = []
    params = PARAMS.get(name) or rng.choice(list(PARAMS.values()))
    obj: dict[str, Any] = {p: _value(rng, name, p, raws) for p in params if rng.random() > 0.05}
    if rng.random() < 0.05:
        obj[rng.choice(["extra", "idempotency_key", "session_id", hostile(rng)])] = 1
    ascii_only = rng.random() < 0.5
    text = json.dumps(obj, ensure_ascii=ascii_only, separators=rng.choice([None, (",", ":")]))
    for i, token in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', token)
    if raws or "NaN" in text or "Infinity" in text:
        tags.add("nonfinite_or_raw_number")
    return text


GARBAGE = (
    "",
    " ",
    "{",
    "}",
    "{}}",
    "null",
    "[]",
    "123",
    '"str"',
    "true",
    "{'level': 1}",
    '{"level": 1,}',
    '{"level": 1} {"level": 2}',
    '{"level": 1, "level": 99}',
    '{"level": /* c */ 1}',
    "\ufeff{}",
    '{"level":\u20281}',
    '{"label": "a\x00b", "level": 1}',
    '{"label": "\\u0000", "level": 1}',
    '{"label": "\\ud800", "level": 1}',
    '{"to": "\\udfff\\ud800", "body": "x"}',
    '{"x": NaN}',
    '{"x": Infinity, "factor": -Infinity}',
    '{"x": 1e999, "factor": 1e999}',
    '{"reason": "\ud800"}',
    '{"\ud800": 1}',
)


def raw_arguments(rng: Random, name: str, tags: set[str]) -> str:
    """The argument text of one call: valid, garbage, cut, huge, deep or surrogate-laden."""
    roll = rng.random()
    if roll < 0.55:
        return _typed(rng, name, tags)
    if roll < 0.65:
        tags.add("garbage")
        if rng.random() < 0.7:
            return rng.choice(GARBAGE)
        return "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 40)))
    if roll < 0.75:
        tags.add("truncated_json")
        text = _typed(rng, name, tags)
        return text[: rng.randint(0, max(0, len(text) - 1))]
    if roll < 0.79:
        tags.add("huge_args")
        return json.dumps({"body": "x" * rng.randint(64_001, 150_000), "to": "a"})
    if roll < 0.83:
        tags.add("large_args")
        return json.dumps({"reason": "y" * rng.randint(5_000, 60_000), "body": "b", "to": "t"})
    if roll < 0.88:
        tags.add("deep_100")
        return '{"level": ' + _nested(100, rng) + "}"
    if roll < 0.90:
        tags.add("deep_10000")
        return '{"level": ' + _nested(10_000, rng) + "}"
    if roll < 0.95:
        tags.add("raw_surrogate_in_raw")
        text = _typed(rng, name, tags)
        cut = rng.randint(0, len(text))
        return text[:cut] + rng.choice(["\ud800", "\udfff", "\udc00\ud800"]) + text[cut:]
    tags.add("separator_in_raw")
    text = _typed(rng, name, tags)
    cut = rng.randint(0, len(text))
    return text[:cut] + rng.choice(["\u2028", "\u2029", "\u0085", "\x00"]) + text[cut:]


BAD_NAMES = (
    "",
    "nope",
    "delete_everything",
    "天气",
    "set_level\u2028",
    "set_level\x00",
    "[/]",
    "[bold]set_level[/bold]",
    "\ud800",
    "set_level\ud800",
    "Set_Level",
    " set_level",
    "scale ",
    "../../etc/passwd",
    "send_note\u0085",
)


def tool_name(rng: Random, tags: set[str]) -> str:
    roll = rng.random()
    if roll < 0.75:
        name = rng.choice(TOOL_NAMES)
        tags.add(f"tool:{name}")
        return name
    tags.add("bad_name")
    if roll < 0.97:
        return rng.choice(BAD_NAMES)
    return "n" * rng.randint(1_000, 20_000)


def reply_text(rng: Random, tags: set[str]) -> str | None:
    roll = rng.random()
    if roll < 0.4:
        return None
    if roll < 0.7:
        return _word(rng, 0, 80, "abc de")
    tags.add("hostile_text")
    text = hostile(rng)
    if rng.random() < 0.05:
        tags.add("huge_text")
        text = text + "w " * rng.randint(20_000, 40_000)
    return text


@dataclass(frozen=True, slots=True)
class PlannedCall:
    id: str
    name: str
    raw: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class Reply:
    """One model reply: what the model function returns, and what it means."""

    payload: ModelResponse | dict[str, Any]
    finish_reason: str
    calls: tuple[PlannedCall, ...]
    tags: frozenset[str]


def _call_count(rng: Random, last: bool) -> int:
    roll = rng.random()
    if roll < (0.5 if last else 0.08):
        return 0
    if roll < 0.6:
        return 1
    if roll < 0.85:
        return rng.randint(2, 5)
    return rng.randint(6, 20)


def _finish_and_flags(rng: Random, n: int, tags: set[str]) -> tuple[FinishReason, list[bool]]:
    if n == 0:
        return ("length" if rng.random() < 0.2 else "stop"), []
    roll = rng.random()
    if roll < 0.5:
        flags = [False] * n
        if rng.random() < 0.1:
            tags.add("flagged_without_length")
            flags[-1] = True
        return "tool_calls", flags
    if roll < 0.6:
        return "stop", [False] * n
    tags.add("length_finish")
    style = rng.random()
    if style < 0.5:
        return "length", [True] * n
    tags.add("length_unflagged")
    if style < 0.75:
        return "length", [False] * n
    return "length", [False] * (n - 1) + [True]


def _usage(rng: Random) -> Usage:
    if rng.random() < 0.5:
        return Usage()
    if rng.random() < 0.03:
        return Usage(input_tokens=10**9, output_tokens=10**9)
    i = rng.randint(0, 4000)
    return Usage(
        input_tokens=i, output_tokens=rng.randint(0, 2000), cached_tokens=rng.randint(0, i)
    )


def make_reply(rng: Random, turn: int, last: bool, on_parse_error: Callable[[str], None]) -> Reply:
    """One random reply for assistant turn `turn` of a run."""
    tags: set[str] = set()
    n = _call_count(rng, last)
    if n >= 6:
        tags.add("many_calls")
    finish, flags = _finish_and_flags(rng, n, tags)
    calls = []
    for i in range(n):
        call_id = f"call_{turn}_{i}"
        if rng.random() < 0.05:
            tags.add("hostile_id")
            call_id += rng.choice(["\u2028", "[/]", "\ud800", " ", "\x00"])
        name = tool_name(rng, tags)
        calls.append(PlannedCall(call_id, name, raw_arguments(rng, name, tags), flags[i]))
    text = reply_text(rng, tags)
    thinking = hostile(rng) if rng.random() < 0.1 else None
    usage = _usage(rng)
    if rng.random() < 0.2 and all(c.truncated == (finish == "length") for c in calls):
        tags.add("script_step")
        step: dict[str, Any] = {
            "text": text,
            "thinking": thinking,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.raw} for c in calls],
            "finish_reason": finish,
        }
        if usage != Usage():
            step["usage"] = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cached_tokens": usage.cached_tokens,
            }
        return Reply(step, finish, tuple(calls), frozenset(tags))
    content: list[Block] = []
    if thinking is not None:
        content.append(ThinkingBlock(text=thinking))
    if text is not None:
        content.append(TextBlock(text=text, phase=rng.choice(["final", "commentary"])))
    for c in calls:
        try:
            parsed = parse_object(c.raw)[0]  # what an adapter pre-parses
        except Exception as exc:
            on_parse_error(f"{type(exc).__name__}: {exc}")
            parsed = None
        content.append(
            ToolCall(id=c.id, name=c.name, raw=c.raw, arguments=parsed, truncated=c.truncated)
        )
    response = ModelResponse(
        content=tuple(content), finish_reason=finish, usage=usage, model="fuzz", raw={"turn": turn}
    )
    return Reply(response, finish, tuple(calls), frozenset(tags))
