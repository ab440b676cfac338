"""MCP servers that answer, list or name things in ways Pi must not trust.

Each test starts `mcp_hostile_app.py` over stdio in one of its modes and runs an agent
whose scripted model calls its tools: whatever the server does (a line that is no JSON-RPC
message included), the run goes on, the model reads the server's own words and the log
stays one line per message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, Limits, RunResult
from pi_runtime.mcp import MCPServer
from pi_runtime.mcp.malformed import MAX_MALFORMED
from pi_runtime.mcp.schema import UnusableSchema, strict_schema
from pi_runtime.messages import ToolResultMessage
from pi_runtime.testing import ScriptedModel, function_call, text
from pi_runtime.tools.arguments import ArgumentSchema

APP = Path(__file__).with_name("mcp_hostile_app.py")
NOT_FOUND = "no record matches q='zzz'; try a shorter query"


def hostile(state: Path, mode: str, **options: Any) -> MCPServer:
    command = [sys.executable, str(APP), "--state", str(state), mode]
    return MCPServer(name="h", command=command, **options)


def run(server: MCPServer, *steps: Any) -> tuple[Agent, RunResult]:
    made = Agent(
        ScriptedModel(list(steps)),
        mcp=[server],
        trace_dir=False,
        limits=Limits(max_steps=10, block_repeated_calls=False),
    )

    async def go() -> RunResult:
        async with made:
            return await made.run("go")

    return made, asyncio.run(go())


def results(result: RunResult) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


def starts(state: Path) -> int:
    return (state / "starts").read_text(encoding="utf-8").count("start")


@pytest.mark.parametrize("code", [-32000, -32001])
def test_a_server_error_with_the_sdks_codes_reaches_the_model_and_keeps_the_session(
    tmp_path: Path, code: int
) -> None:
    # -32000 and -32001 are the SDK's "connection closed" and "timed out", and also
    # JSON-RPC's codes for a server's own errors
    made, result = run(
        hostile(tmp_path, "error_code"),
        function_call("lookup", {"q": "zzz", "code": code}),
        function_call("lookup", {"q": "zz", "code": code}),
        function_call("echo", {"text": "still here"}),
        text("done"),
    )

    assert result.status == "completed", result.error
    first, second, echoed = results(result)
    for failed in (first, second):
        error = json.loads(failed.content)
        assert error["kind"] == "tool_error"
        assert NOT_FOUND in error["message"]
    assert echoed.content == "still here"
    assert made.mcp.connections["h"].sessions == 1  # a healthy server is never restarted
    assert starts(tmp_path) == 1


@pytest.mark.parametrize(
    ("mode", "tool", "why"),
    [
        ("deep_schema", "deep", "nested deeper than"),
        ("overflow_pattern", "bad", "OverflowError"),
        ("ref_loop", "loop", "leads back to itself"),
    ],
)
def test_a_schema_pi_cannot_prepare_leaves_out_only_that_tool(
    tmp_path: Path, mode: str, tool: str, why: str
) -> None:
    made, result = run(
        hostile(tmp_path, mode), function_call("echo", {"text": "fine"}), text("done")
    )

    assert result.status == "completed", result.error
    (echoed,) = results(result)
    assert echoed.content == "fine"
    assert set(made.mcp.skipped) == {f"h.{tool}"}
    assert why in made.mcp.skipped[f"h.{tool}"]


def test_a_tool_name_with_control_characters_is_shown_escaped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pi_runtime.mcp"):
        made, result = run(hostile(tmp_path, "control_name"), text("done"))

    assert result.status == "completed", result.error
    escaped = "x\\nerror: the agent file was deleted\\x1b[2J\\x1b[31m"
    assert list(made.mcp.skipped) == [f"h.{escaped}"]
    (warning,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert warning.startswith(f"MCP tool h.{escaped} left out: ")
    assert "\n" not in warning and "\x1b" not in warning


# a call waits for its answer far longer than the test may take: only failing at once passes
PATIENT = {"timeout_s": 60.0, "retries": 0}
GARBLED = ["not_json", "surrogate", "invalid"]


@pytest.mark.parametrize("kind", GARBLED)
def test_a_malformed_reply_fails_the_call_at_once_and_keeps_the_session(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        made, result = run(
            hostile(tmp_path, "malformed", **PATIENT),
            function_call("garble", {"kind": kind}),
            function_call("echo", {"text": "still here"}),
            text("done"),
        )

    assert result.status == "completed", result.error
    garbled, echoed = results(result)
    error = json.loads(garbled.content)
    assert error["kind"] == "tool_error"
    assert error["message"].startswith("MCP server 'h' (python") and (
        " sent a malformed message while the call waited for its answer (" in error["message"]
    )
    assert echoed.content == "still here"
    assert made.mcp.connections["h"].sessions == 1  # one stray line is no broken server
    assert starts(tmp_path) == 1
    told = [r for r in caplog.records if "malformed message" in r.getMessage()]
    told += [r for r in caplog.records if r.name == "mcp.client.stdio"]
    assert told
    for shown in [error["message"], *(r.getMessage() for r in told)]:
        assert shown.isprintable() and len(shown) < 700, shown  # escaped and clipped
    assert not any(r.exc_info for r in told)  # no traceback per line


def test_the_server_text_in_a_malformed_line_is_shown_escaped_and_clipped(
    tmp_path: Path,
) -> None:
    _, result = run(
        hostile(tmp_path, "malformed", **PATIENT),
        function_call("garble", {"kind": "not_json"}),
        text("done"),
    )

    (garbled,) = results(result)
    message = json.loads(garbled.content)["message"]
    began = "it began: error: \\x1b[2J\\x1b[31m\\rerror: the agent file was deleted\\u202eAAA"
    assert "Invalid JSON" in message and began in message
    assert "A" * 200 not in message  # of the 5,000 sent
    assert message.endswith("…). Whether the call took effect is unknown.")


def test_a_server_that_keeps_sending_malformed_messages_is_started_again(
    tmp_path: Path,
) -> None:
    steps = []
    for n, kind in enumerate(GARBLED[:MAX_MALFORMED]):  # as many as a session may send
        steps += [function_call("garble", {"kind": kind}), function_call("echo", {"text": n})]
    made, result = run(hostile(tmp_path, "malformed", **PATIENT), *steps, text("done"))

    assert result.status == "completed", result.error
    done = results(result)
    assert [m.content for m in done[1::2]] == [str(n) for n in range(MAX_MALFORMED)]
    for failed in done[::2]:
        error = json.loads(failed.content)
        assert error["kind"] == "tool_error" and "sent a malformed message" in error["message"]
    # kept after each stray line but the last, which ended it: the last echo started anew
    assert made.mcp.connections["h"].sessions == 2
    assert starts(tmp_path) == 2


LOOP = {"not": {"$ref": "#/$defs/n"}}


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"$ref": "#"}, "# leads back"),
        ({"properties": {"q": {"$ref": "#/$defs/n"}}, "$defs": {"n": LOOP}}, "#/$defs/n leads"),
        ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}},
         "leads back"),
        ({"$defs": {"a": {"$anchor": "A", "not": {"$ref": "#A"}}}}, "leads back"),
        ({"properties": {"q": {"$ref": "#/$defs/gone"}}}, "which it does not hold"),
        ({"properties": {"q": {"$ref": "#/$defs/gone"}}, "$defs": {"gone~": {}}},
         "which it does not hold"),
    ],
)  # fmt: skip
def test_a_schema_whose_refs_loop_or_point_nowhere_is_unusable(
    schema: dict[str, Any], why: str
) -> None:
    with pytest.raises(UnusableSchema, match=re.escape(why)):
        strict_schema({"type": "object", **schema})


@pytest.mark.parametrize(
    ("schema", "arguments", "valid"),
    [
        ({"properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},  # a tree
         {"kids": [{"kids": [{"kids": []}]}]}, True),
        ({"properties": {"q": {"$ref": "#/$defs/f"}}, "$defs": {"f": False}}, {"q": 1}, False),
        ({"properties": {"q": {"const": {"$ref": "#/nowhere"}}}},  # data, not a reference
         {"q": {"$ref": "#/nowhere"}}, True),
        ({"properties": {"q": {"$ref": "#/$defs/a~1b"}}, "$defs": {"a/b": {"type": "integer"}}},
         {"q": "x"}, False),
        ({"properties": {"q": {"$ref": "#/$defs/a%20b"}}, "$defs": {"a b": {"type": "string"}}},
         {"q": "x"}, True),
        # schemas named as keywords that hold data elsewhere (`default`, `const`)
        ({"properties": {"q": {"$ref": "#/$defs/default"}}, "$defs": {"default": {"type": "integer"}}},
         {"q": "x"}, False),
        ({"properties": {"const": {"type": "integer"}, "y": {"$ref": "#/properties/const"}}},
         {"y": 1}, True),
    ],
)  # fmt: skip
def test_refs_that_go_into_the_value_or_name_what_is_there_are_kept(
    schema: dict[str, Any], arguments: dict[str, Any], valid: bool
) -> None:
    kept = strict_schema({"type": "object", **schema})
    assert ArgumentSchema.of(kept).validator.is_valid(arguments) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"q": {"type": "string", "pattern": "^(?=a)(a+)+$"}}},
        {"patternProperties": {"^(a)\\1": {"type": "string"}}},
        {"$defs": {"d": {"type": "string", "pattern": "(?<!x)y"}}},
    ],
    ids=["lookahead", "backreference-key", "lookbehind-in-defs"],
)
def test_a_servers_pattern_that_only_a_backtracking_engine_runs_is_unusable(
    schema: dict[str, Any],
) -> None:
    # `^(?=a)(a+)+$` against 24 `a`s and a `!` took 0.5 s on `re`, doubling with each `a`
    with pytest.raises(UnusableSchema, match="needs lookaround or a backreference"):
        strict_schema({"type": "object", **schema})
    # a property named `pattern`, and a pattern the linear engine runs, are fine
    fine = {"properties": {"pattern": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$"}}}
    assert strict_schema({"type": "object", **fine})["properties"]["pattern"]["pattern"]
