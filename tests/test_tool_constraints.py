"""Declared argument constraints, and numbers and text no JSON reader should pass on.

A constraint written on a parameter (`Annotated[int, Field(le=10)]`, `= Field(5, ge=1)`)
is published in the schema the model reads and enforced by the gate, with a message that
names the field and the bound. NaN and ±Infinity never reach a tool. A lone UTF-16
surrogate is repaired to U+FFFD where it enters, in arguments and in results, so nothing
downstream (hashes, keys, traces, providers) ever meets one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import AfterValidator, BaseModel, Field, ValidationError

from pi_runtime import Agent, Limits, ToolCall, ToolError, ToolResultMessage, UserError, tool
from pi_runtime.messages import has_surrogates, parse_object
from pi_runtime.messages.canonical import action_hash
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import Gate, ToolOutcome, ToolSpec, encode_result, idempotency_key


def run(spec: ToolSpec, raw: str, *, id: str = "call_1") -> ToolOutcome:
    gate = Gate([spec], session_id="s", retry_base_s=0.001)
    return asyncio.run(gate.run(ToolCall(id=id, name=spec.name, raw=raw)))


def error_of(outcome: ToolOutcome) -> dict[str, str]:
    assert outcome.message is not None and outcome.message.is_error
    content = json.loads(outcome.message.content)
    assert set(content) == {"kind", "message", "hint"}
    return content


def no_nan(literal: str) -> Any:
    raise AssertionError(f"{literal} is not JSON")


def strict_json(text: str) -> Any:
    """`text` parsed the way any JSON reader must accept it: no NaN, no Infinity."""
    return json.loads(text, parse_constant=no_nan)


def walk_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*walk_strings(k), *walk_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in walk_strings(v)]
    return []


ran: list[dict[str, Any]] = []


def _pick(
    n: Annotated[int, Field(ge=-5, le=10)],
    x: Annotated[float, Field(gt=0, lt=1)] = 0.5,
    s: Annotated[str, Field(min_length=2, max_length=5, pattern=r"^[a-z]+$")] = "ab",
    tags: Annotated[list[int], Field(min_length=1, max_length=3)] = Field(
        default_factory=lambda: [0]
    ),
    m: int = Field(0, multiple_of=3),
    level: int = Field(5, ge=1, description="How loud."),
    scores: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list),
) -> str:
    """Pick some things.

    Args:
        n: how many.
        x: a fraction.
        level: overridden by the Field's description.
    """
    ran.append({"n": n, "x": x, "s": s, "tags": tags, "m": m, "level": level, "scores": scores})
    return "ok"


@functools.cache
def pick() -> ToolSpec:
    """`_pick` as a tool, built on first use so each test fails on its own when it breaks."""
    return tool(_pick)


# --- constraints in the published schema ------------------------------------------------


def test_annotated_and_field_constraints_are_in_the_published_schema() -> None:
    props = pick().definition.parameters["properties"]

    assert props["n"] == {
        "type": "integer",
        "minimum": -5,
        "maximum": 10,
        "description": "how many.",
    }
    assert props["x"]["exclusiveMinimum"] == 0 and props["x"]["exclusiveMaximum"] == 1
    assert (props["s"]["minLength"], props["s"]["maxLength"]) == (2, 5)
    assert props["s"]["pattern"] == "^[a-z]+$"
    assert (props["tags"]["minItems"], props["tags"]["maxItems"]) == (1, 3)
    assert props["m"]["multipleOf"] == 3
    assert props["scores"]["items"]["minimum"] == 0
    assert pick().parameters["additionalProperties"] is False
    assert pick().parameters["required"] == ["n"]


def test_a_field_default_is_the_default_not_the_value_passed() -> None:
    props = pick().parameters["properties"]
    ran.clear()

    outcome = run(pick(), '{"n": 1}')

    assert props["m"]["default"] == 0
    assert props["level"] == {
        "type": "integer",
        "minimum": 1,
        "default": 5,
        "description": "How loud.",
    }
    assert outcome.message is not None and not outcome.is_error, outcome.message
    assert ran == [{"n": 1, "x": 0.5, "s": "ab", "tags": [0], "m": 0, "level": 5, "scores": []}]


def test_field_description_wins_and_the_docstring_describes_the_rest() -> None:
    @tool
    def f(
        a: Annotated[int, Field(le=3, description="From Annotated.")],
        b: Annotated[int, Field(le=3)],
        c: int = Field(1, ge=0),
    ) -> str:
        """Do f.

        Args:
            a: from the docstring, hidden.
            b: from the docstring.
            c: also from the docstring.
        """
        return ""

    props = f.parameters["properties"]
    assert props["a"]["description"] == "From Annotated."
    assert props["b"]["description"] == "from the docstring."
    assert props["c"]["description"] == "also from the docstring."
    assert props["c"]["minimum"] == 0


# --- constraints enforced by the gate ---------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ('{"n": 99}', "$.n: must be <= 10, got 99"),
        ('{"n": -6}', "$.n: must be >= -5, got -6"),
        ('{"n": 1, "x": 0}', "$.x: must be > 0, got 0"),
        ('{"n": 1, "x": 1.0}', "$.x: must be < 1, got 1"),
        ('{"n": 1, "s": "a"}', "$.s: must be at least 2 characters long, got 1"),
        ('{"n": 1, "s": "abcdef"}', "$.s: must be at most 5 characters long, got 6"),
        ('{"n": 1, "s": "A1"}', "$.s: must match the pattern '^[a-z]+$', got 'A1'"),
        ('{"n": 1, "tags": []}', "$.tags: must have at least 1 item, got 0"),
        ('{"n": 1, "tags": [1, 2, 3, 4]}', "$.tags: must have at most 3 items, got 4"),
        ('{"n": 1, "m": 4}', "$.m: must be a multiple of 3, got 4"),
        ('{"n": 1, "level": 0}', "$.level: must be >= 1, got 0"),
        ('{"n": 1, "scores": [1, -0.5]}', "$.scores[1]: must be >= 0, got -0.5"),
    ],
)
def test_gate_refuses_a_value_outside_its_bounds_naming_field_and_bound(
    raw: str, line: str
) -> None:
    ran.clear()

    error = error_of(run(pick(), raw))

    assert error["kind"] == "invalid_arguments"
    assert line in error["message"], error["message"]
    assert ran == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"n": 99},
        {"n": -6},
        {"n": 1, "x": 0},
        {"n": 1, "x": 1},
        {"n": 1, "s": "a"},
        {"n": 1, "s": "abcdef"},
        {"n": 1, "s": "A1"},
        {"n": 1, "tags": []},
        {"n": 1, "tags": [1, 2, 3, 4]},
        {"n": 1, "m": 4},
        {"n": 1, "scores": [1, -0.5]},
    ],
)
def test_schema_check_and_pydantic_check_report_a_violation_alike(
    arguments: dict[str, Any],
) -> None:
    from pi_runtime.tools.arguments import describe_pydantic_error, describe_schema_error

    from_schema = [
        describe_schema_error(e)
        for e in Draft202012Validator(pick().parameters).iter_errors(arguments)
    ]
    with pytest.raises(ValidationError) as caught:
        pick().validate_python(arguments)
    from_pydantic = [describe_pydantic_error(e) for e in caught.value.errors()]

    assert from_schema == from_pydantic
    assert len(from_schema) == 1


def even(value: int) -> int:
    if value % 2:
        raise ValueError("must be even")
    return value


def test_a_constraint_only_pydantic_can_check_is_enforced_too() -> None:
    @tool
    def half(n: Annotated[int, AfterValidator(even)]) -> int:
        return n // 2

    error = error_of(run(half, '{"n": 3}'))

    assert error["kind"] == "invalid_arguments"
    assert "$.n:" in error["message"] and "must be even" in error["message"]


def odd_only(value: int) -> int:
    if value % 2 == 0:
        raise LookupError(f"no odd partner for {value}")
    return value


def test_a_validator_raising_something_odd_is_a_refusal_not_a_crash() -> None:
    @tool
    def halve(n: Annotated[int, AfterValidator(odd_only)]) -> int:
        return n // 2

    error = error_of(run(halve, '{"n": 4}'))

    assert error["kind"] == "invalid_arguments"
    assert "LookupError: no odd partner for 4" in error["message"]


def test_a_long_offending_value_is_not_echoed_back_whole() -> None:
    error = error_of(run(pick(), json.dumps({"n": 1, "s": "A" * 10_000})))

    assert "$.s:" in error["message"]
    assert len(error["message"]) < 600


# --- NaN and Infinity -------------------------------------------------------------------


def _scale(x: float, points: list[float] | None = None) -> str:
    """Scale."""
    ran.append({"x": x, "points": points})
    return "ok"


@functools.cache
def scale() -> ToolSpec:
    return tool(_scale)


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ('{"x": NaN}', "$.x: NaN is not a finite number"),
        ('{"x": Infinity}', "$.x: Infinity is not a finite number"),
        ('{"x": -Infinity}', "$.x: -Infinity is not a finite number"),
        ('{"x": 1e999}', "$.x: 1e999 is not a finite number"),
        ('{"x": -1e400}', "$.x: -1e400 is not a finite number"),
        ('{"x": 1, "points": [0.5, NaN]}', "$.points[1]: NaN is not a finite number"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(raw: str, line: str) -> None:
    ran.clear()

    error = error_of(run(scale(), raw))

    assert error["kind"] == "invalid_arguments"
    assert line in error["message"], error["message"]
    assert ran == []


@pytest.mark.parametrize("raw", ["3e20", "-9.3e18", "8.740521886886674e+36"])
def test_a_whole_float_past_64_bits_is_refused_asking_for_its_digits(raw: str) -> None:
    ran.clear()

    error = error_of(run(pick(), f'{{"n": 0, "m": {raw}}}'))

    assert error["kind"] == "invalid_arguments"
    assert "$.m: " in error["message"] and "write out its digits" in error["message"]
    assert "input string" not in error["message"], error["message"]
    assert ran == []


def test_a_whole_number_past_64_bits_given_as_digits_is_accepted() -> None:
    ran.clear()

    outcome = run(pick(), '{"n": 0, "m": 300000000000000000000}')

    assert not outcome.is_error, outcome.message
    assert ran and ran[0]["m"] == 3 * 10**20


def test_parse_object_refuses_non_finite_numbers() -> None:
    assert parse_object('{"a": {"b": [NaN]}}') == (
        None,
        "$.a.b[0]: NaN is not a finite number (JSON has no NaN or Infinity).",
    )
    assert parse_object('{"a": 1e308, "b": "NaN"}') == ({"a": 1e308, "b": "NaN"}, "")


def test_already_parsed_arguments_with_nan_are_refused_by_validation() -> None:
    with pytest.raises(ValidationError) as caught:
        scale().validate_python({"x": 1.0, "points": [1.0, math.inf]})

    assert [e["loc"] for e in caught.value.errors()] == [("points", 1)]
    with pytest.raises(ValidationError):
        scale().validate_python({"x": math.nan})


# --- lone surrogates in arguments -------------------------------------------------------


@tool(idempotent=False)
def echo(text: str, idempotency_key: str | None = None) -> str:
    """Repeat the text."""
    return text


def test_escaped_lone_surrogate_in_arguments_is_repaired_and_the_call_runs() -> None:
    outcome = run(echo, '{"text": "a\\ud800b\\udc00"}')

    assert outcome.message is not None and not outcome.is_error, outcome.message
    assert outcome.message.content == "a\ufffdb\ufffd"
    assert outcome.idempotency_key == idempotency_key("s", "call_1")


def test_escaped_surrogate_pair_stays_the_character_it_spells() -> None:
    outcome = run(echo, '{"text": "\\ud83d\\ude00"}')

    assert outcome.message is not None and outcome.message.content == "\U0001f600"


def test_parse_object_repairs_keys_and_values() -> None:
    assert parse_object('{"k\\udc00": ["\\ud800", "\\ud83d\\ude00"]}') == (
        {"k\ufffd": ["\ufffd", "\U0001f600"]},
        "",
    )


def test_a_raw_lone_surrogate_and_a_hostile_call_id_do_not_break_the_gate() -> None:
    outcome = run(echo, '{"text": "x\ud800"}', id="call_\udc00")

    assert outcome.message is not None and outcome.message.content == "x\ufffd"
    assert outcome.idempotency_key is not None
    assert outcome.idempotency_key == idempotency_key("s", "call_\ufffd")


def test_canonical_hash_sees_the_repaired_arguments() -> None:
    raw = '{"text": "a\\ud800"}'

    assert action_hash("echo", None, raw) == action_hash("echo", {"text": "a\ufffd"}, "")


def test_a_run_with_surrogate_arguments_writes_a_clean_trace(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "echo", "arguments": '{"text": "\\ud800!"}'}]},
            {"text": "done"},
        ]
    )
    agent = Agent(model, tools=[echo], trace_dir=tmp_path, limits=Limits(max_steps=3))

    result = agent.run_sync("go")

    assert result.stop_reason == "final_answer", result.error
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in results] == ["\ufffd!"]
    result.to_json().encode("utf-8")
    lines = Path(result.trace).read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        assert not any(has_surrogates(s) for s in walk_strings(json.loads(line)))


# --- results and error messages ---------------------------------------------------------


class Reading(BaseModel):
    label: str
    value: float


@dataclasses.dataclass
class Sample:
    name: str


def returning(value: Any) -> ToolSpec:
    @tool
    def produce() -> Any:
        """Produce a value."""
        return value

    return produce


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\ud800b", "a\ufffdb"),
        ({"k\udc00": ["x\ud800", "\ud83d\ude00"]}, {"k\ufffd": ["x\ufffd", "\U0001f600"]}),
        (
            {"r": math.nan, "i": math.inf, "j": [-math.inf]},
            {"r": "NaN", "i": "Infinity", "j": ["-Infinity"]},
        ),
        (Reading(label="t\udfff", value=math.inf), {"label": "t\ufffd", "value": "Infinity"}),
        (Sample(name="\ud800"), {"name": "\ufffd"}),
    ],
    ids=["str", "dict", "non-finite", "model", "dataclass"],
)
def test_a_result_is_repaired_into_well_formed_json(value: Any, expected: Any) -> None:
    outcome = run(returning(value), "{}")

    assert outcome.message is not None and not outcome.is_error, outcome.message
    content = outcome.message.content
    content.encode("utf-8")
    assert (content if isinstance(expected, str) else strict_json(content)) == expected


def test_encode_result_gives_json_any_reader_accepts() -> None:
    assert encode_result([math.nan, 1.5, "\ud800"]) == '["NaN",1.5,"\ufffd"]'


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("bad \ud800 value"),
        RuntimeError("bad \ud800 value"),
        ToolError("bad \ud800 value"),
    ],
    ids=["value-error", "runtime-error", "tool-error"],
)
def test_an_error_message_with_a_lone_surrogate_is_repaired(exc: Exception) -> None:
    @tool
    def fail() -> str:
        """Fail."""
        raise exc

    outcome = run(fail, "{}")

    error = error_of(outcome)
    assert "bad \ufffd value" in error["message"]
    assert outcome.message is not None
    outcome.message.content.encode("utf-8")
    assert outcome.message.error is not None
    assert not has_surrogates(outcome.message.error.message)


# --- property: declared bounds hold for every call the gate runs -------------------------


def as_int(value: Any) -> int | None:
    """The integer JSON Schema and pydantic both accept for `value` (`3.0` is 3), or None.

    pydantic takes a whole float only within 64 bits: `1e20` must come as its digits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value) if abs(value) < 2**63 else None
    return value if isinstance(value, int) else None


def violations(arguments: dict[str, Any]) -> set[str]:
    """Fields of `pick` whose value breaks a declared constraint (or its type)."""
    bad: set[str] = set()
    n = as_int(arguments.get("n"))
    if n is None or not -5 <= n <= 10:
        bad.add("n")
    x = arguments.get("x", 0.5)
    if not (
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 < x < 1
    ):
        bad.add("x")
    s = arguments.get("s", "ab")
    if not (isinstance(s, str) and re.fullmatch("[a-z]{2,5}", s)):
        bad.add("s")
    m = as_int(arguments.get("m", 0))
    if m is None or m % 3:
        bad.add("m")
    return bad


numbers = st.integers(-20, 20) | st.integers() | st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=numbers,
    x=st.none() | numbers,
    s=st.none() | st.text(max_size=8) | st.from_regex(r"[a-z]{1,6}\n?", fullmatch=True),
    m=st.none() | numbers,
)
@example(n=10, x=0.999, s="abcde", m=-3)
@example(n=3, x=math.nan, s="ab\n", m=3)
@example(n=0, x=None, s=None, m=8.740521886886674e36)  # whole, but past 64 bits as a float
def test_the_gate_never_runs_a_call_that_breaks_a_declared_bound(
    n: Any, x: Any, s: Any, m: Any
) -> None:
    arguments = {"n": n}
    for name, value in (("x", x), ("s", s), ("m", m)):
        if value is not None:
            arguments[name] = value
    ran.clear()

    outcome = run(pick(), json.dumps(arguments))

    bad = violations(arguments)
    if bad:
        error = error_of(outcome)
        assert error["kind"] == "invalid_arguments"
        assert ran == []
        named = set(re.findall(r"\$\.(\w+)", error["message"]))
        assert named and named <= bad, (arguments, error["message"])
    else:
        assert not outcome.is_error, (arguments, outcome.message)
        assert len(ran) == 1
        assert -5 <= ran[0]["n"] <= 10 and 0 < ran[0]["x"] < 1
        assert re.fullmatch("[a-z]{2,5}", ran[0]["s"]) and ran[0]["m"] % 3 == 0


def test_a_cyclic_result_with_a_surrogate_key_fails_instead_of_hanging() -> None:
    cyclic: dict[str, Any] = {"k\ud800": 1}
    cyclic["self"] = cyclic

    outcome = run(returning(cyclic), "{}")

    assert error_of(outcome)["kind"]
    assert outcome.executed is True


def test_a_pattern_the_schema_checker_cannot_compile_is_a_user_error() -> None:
    def letters(word: Annotated[str, Field(pattern=r"^\p{L}+$")]) -> str:
        return word

    with pytest.raises(UserError, match=r"'letters': unusable JSON Schema: .*is not a 'regex'"):
        tool(letters)
