"""Property tests: whatever argument text a model produces, the gate answers and runs end.

The gate's promise is that nothing raises: every call becomes a tool-result message,
either a result or `{kind, message, hint}`. A run fed the same garbage through a model
must still end with a well-formed `RunResult`, and the model must hear about its mistake.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, get_args

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pi_runtime import Agent, Limits, RunResult, ToolCall, ToolResultMessage, tool
from pi_runtime.messages import RunStatus, StopReason
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import Gate, ToolOutcome

RUN_STATUSES = {"completed", "stopped", "failed", "awaiting"}
PROPERTY_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Line(BaseModel):
    sku: str
    qty: int


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@tool
def place_order(items: list[Line], rush: bool = False) -> dict[str, Any]:
    """Order some lines."""
    return {"lines": len(items), "rush": rush}


@tool
def measure(x: float = 0.0, n: int = 0) -> float:
    """Add a float and an int."""
    return x + n


@tool
def anything(v: Any = None) -> Any:
    """Return whatever it was given."""
    return v


TOOLS = [echo, place_order, measure, anything]
NAMES = [t.name for t in TOOLS]
PARAMS = ["text", "items", "rush", "x", "n", "v", "idempotency_key"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(PARAMS) | st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def nested(depth: int, wrap: str) -> str:
    opener, closer = ("[", "]") if wrap == "list" else ('{"a":', "}")
    return opener * depth + "0" + closer * depth


raw_arguments = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.dictionaries(st.sampled_from(PARAMS), json_values, max_size=5).map(json.dumps),
    st.builds(nested, st.integers(1, 25_000), st.sampled_from(["list", "dict"])),
    st.builds(
        lambda depth, key: json.dumps({key: None}).replace("null", nested(depth, "list")),
        st.integers(1, 25_000),
        st.sampled_from(PARAMS),
    ),
    st.integers(1, 6_000).map(lambda digits: '{"n": ' + "9" * digits + "}"),
    st.integers(0xD800, 0xDFFF).map(lambda code: f'{{"text": "\\u{code:04x}"}}'),
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "nan",
            '{"x": NaN}',
            '{"x": Infinity}',
            '{"x": -Infinity}',
            '{"x": 1e999}',
            '{"x": -1e400}',
            '{"x": "NaN"}',
            '{"text": "\\u0000"}',
            '{"v": 1e309}',
            "",
            "\x00",
            "{",
            '{"text": "unterminated',
            '{"text": "a"} trailing',
            '{"text": "a", "text": "b"}',
        ]
    ),
)


def assert_well_formed(outcome: ToolOutcome) -> None:
    message = outcome.message
    assert isinstance(message.content, str)
    message.content.encode("utf-8")  # a provider must be able to send it
    if message.is_error:
        content = json.loads(message.content)
        assert set(content) == {"kind", "message", "hint"}
        assert all(isinstance(v, str) and v for v in content.values())
    else:
        assert outcome.executed is True


@PROPERTY_SETTINGS
@given(name=st.sampled_from([*NAMES, "no_such_tool"]), raw=raw_arguments, cut=st.booleans())
@example(name="echo", raw="[" * 20_000 + "]" * 20_000, cut=False)
@example(name="echo", raw='{"text": "\\ud800"}', cut=False)
@example(name="anything", raw='{"v": ' + "[" * 400 + "]" * 400 + "}", cut=False)
def test_gate_never_raises_on_any_argument_text(name: str, raw: str, cut: bool) -> None:
    gate = Gate(TOOLS, session_id="prop", retry_base_s=0.001)

    outcome = asyncio.run(gate.run(ToolCall(id="call_0", name=name, raw=raw, truncated=cut)))

    assert outcome.message.tool_call_id == "call_0"
    assert_well_formed(outcome)
    if cut:
        assert outcome.executed is False


@PROPERTY_SETTINGS
@given(arguments=st.dictionaries(st.sampled_from(PARAMS), json_values, max_size=5).map(json.dumps))
def test_gate_runs_a_tool_only_with_arguments_its_schema_accepts(arguments: str) -> None:
    seen: list[dict[str, Any]] = []

    @tool(idempotent=False)
    def record(text: str, n: int = 0, idempotency_key: str | None = None) -> str:
        seen.append({"text": text, "n": n})
        return "ok"

    gate = Gate([record], session_id="prop", retry_base_s=0.001)
    outcome = asyncio.run(gate.run(ToolCall(id="c", name="record", raw=arguments)))

    assert_well_formed(outcome)
    parsed = json.loads(arguments)
    valid = (
        set(parsed) <= {"text", "n"}
        and isinstance(parsed.get("text"), str)
        and (
            "n" not in parsed
            or (isinstance(parsed["n"], int) and not isinstance(parsed["n"], bool))
            or (isinstance(parsed["n"], float) and parsed["n"].is_integer())
        )
    )
    assert outcome.is_error is not valid
    assert len(seen) == (1 if valid else 0)


def scripted_run(name: str, raw: str, finish: str) -> RunResult:
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": name, "arguments": raw}], "finish_reason": finish},
            {"text": "I could not do that."},
        ]
    )
    agent = Agent(
        model, tools=TOOLS, trace_dir=False, limits=Limits(max_steps=3, retry_base_s=0.001)
    )
    return agent.run_sync("do something")


@PROPERTY_SETTINGS
@given(
    name=st.sampled_from([*NAMES, "no_such_tool"]),
    raw=raw_arguments,
    finish=st.sampled_from(["tool_calls", "length"]),
)
@example(name="echo", raw="[" * 20_000 + "]" * 20_000, finish="tool_calls")
@example(name="echo", raw='{"text": "\\ud800"}', finish="tool_calls")
@example(name="echo", raw='{"":"\\uD800"}', finish="tool_calls")
@example(name="echo", raw=nested(300, "dict"), finish="tool_calls")
def test_agent_run_with_any_tool_arguments_ends_well_formed(
    name: str, raw: str, finish: str
) -> None:
    result = scripted_run(name, raw, finish)

    assert isinstance(result, RunResult)
    assert result.status in RUN_STATUSES
    assert set(get_args(RunStatus)) == RUN_STATUSES
    assert result.stop_reason in get_args(StopReason)
    assert result.stop_reason != "internal_error", result.error
    json.loads(result.to_json())  # the `pi run --json` object can always be produced
    # Bad arguments are the model's mistake to fix: it hears of it, and the run goes on.
    assert result.stop_reason == "final_answer", (result.stop_reason, result.error)
    tool_results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in tool_results] == ["call_0_0"]
    if finish == "length" and name in NAMES:
        assert tool_results[0].is_error
        assert json.loads(tool_results[0].content)["kind"] == "truncated_call"
    if tool_results[0].is_error:
        assert set(json.loads(tool_results[0].content)) == {"kind", "message", "hint"}
