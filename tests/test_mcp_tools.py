"""MCP tools against real MCP servers, over stdio and over Streamable HTTP.

Each test starts `mcp_server_app.py` (stdio: Pi starts it; HTTP: the test does, on an
ephemeral port of 127.0.0.1) and runs an agent whose scripted model calls its tools.
The server records every call it receives, so a test can tell what reached it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_support import *  # noqa: F403  (the served fixture)
from mcp_support import Served, alive, wait_for
from pi_runtime import Agent, Limits, RunResult
from pi_runtime.mcp import MCPServer
from pi_runtime.messages import ToolResultMessage
from pi_runtime.testing import ScriptedModel, function_call, parallel_calls, text


def agent(server: MCPServer, *steps: Any, **options: Any) -> Agent:
    options.setdefault("limits", Limits(max_steps=10))
    return Agent(ScriptedModel(list(steps)), mcp=[server], trace_dir=False, **options)


def results(result: RunResult) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


def error_of(message: ToolResultMessage) -> dict[str, Any]:
    assert message.is_error, message.content
    parsed: dict[str, Any] = json.loads(message.content)
    return parsed


async def run_and_close(made: Agent, prompt: str = "go") -> RunResult:
    async with made:
        return await made.run(prompt)


# --- the gate, both transports -----------------------------------------------------------


def test_a_fast_tool_answers_through_the_gate(served: Served) -> None:
    made = agent(served.server(), function_call("add", {"a": 2, "b": 3}), text("5"))

    result = asyncio.run(run_and_close(made))

    assert result.status == "completed", result.error
    (answer,) = results(result)
    assert not answer.is_error
    assert json.loads(answer.content) == {"sum": 5}  # structuredContent, not the text copy
    assert served.calls() == ["add"]


def test_arguments_that_miss_the_schema_never_reach_the_server(served: Served) -> None:
    made = agent(
        served.server(),
        function_call("add", {"a": "two", "b": 3}),
        function_call("add", {"a": 2, "b": 3, "c": 4}),
        function_call("add", {"a": 2, "b": 3}),
        text("5"),
    )

    result = asyncio.run(run_and_close(made))

    first, second, third = results(result)
    assert error_of(first)["kind"] == "invalid_arguments"
    assert "$.a" in error_of(first)["message"]
    assert error_of(second)["kind"] == "invalid_arguments"  # the closed schema: no `c`
    assert "'c' was unexpected" in error_of(second)["message"]
    assert json.loads(third.content) == {"sum": 5}
    assert served.calls() == ["add"]  # only the good call reached the server


def test_a_stalling_tool_times_out_and_the_session_goes_on(served: Served) -> None:
    made = agent(
        served.server(timeout_s=0.5),
        function_call("stall", {"seconds": 60}),
        function_call("echo", {"text": "still here"}),
        text("done"),
    )

    result = asyncio.run(run_and_close(made))

    stalled, echoed = results(result)
    assert error_of(stalled)["kind"] == "timeout"
    assert echoed.content == "still here"
    assert made.mcp.connections["test"].sessions == 1  # a timeout is not a dead server
    assert served.calls() == ["stall", "echo"]  # not retried: stall is not idempotent


def test_a_server_killed_mid_call_is_transient_then_restarted(served: Served) -> None:
    made = agent(
        served.server(timeout_s=60),
        function_call("stall", {"seconds": 60}),
        function_call("echo", {"text": "back"}),
        text("done"),
    )
    first_pid = served.pid() if served.transport == "http" else None

    def kill_when_stalling() -> None:
        wait_for(lambda: "stall" in served.calls(), what="the stall call")
        served.kill()
        served.revive()

    killer = threading.Thread(target=kill_when_stalling)
    killer.start()
    result = asyncio.run(run_and_close(made))
    killer.join()

    stalled, echoed = results(result)
    error = error_of(stalled)
    assert error["kind"] == "transient"
    assert "again at the next call" in error["message"]
    assert "Whether the call took effect is unknown" in error["message"]
    assert echoed.content == "back"
    assert result.status == "completed"
    assert made.mcp.connections["test"].sessions == 2
    if first_pid is not None:
        assert served.pid() != first_pid


def test_one_session_serves_every_run_of_an_agent(served: Served) -> None:
    steps = [function_call("increment"), text("counted")]
    made = agent(served.server(), *steps)

    async def twice() -> list[RunResult]:
        async with made:
            return [await made.run("count"), await made.run("count again")]

    first, second = asyncio.run(twice())

    assert results(first)[0].content.startswith("1 in process")
    assert results(second)[0].content.startswith("2 in process")  # the same server state
    assert results(first)[0].content.split()[-1] == results(second)[0].content.split()[-1]
    assert served.handshakes() == 1
    assert made.mcp.connections["test"].sessions == 1


def test_concurrent_calls_share_the_session(served: Served) -> None:
    calls = [function_call("stall", {"seconds": 0.2 + i / 100}, id=f"c{i}") for i in range(6)]
    made = agent(served.server(), parallel_calls(*calls), text("slept"))

    result = asyncio.run(run_and_close(made))

    assert [m.content for m in results(result)] == ["awake"] * 6
    assert served.calls() == ["stall"] * 6
    assert served.handshakes() == 1
    assert made.mcp.connections["test"].sessions == 1


# --- stdio specifics -----------------------------------------------------------------------


@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[Served]:
    server = Served("stdio", tmp_path / "server")
    try:
        yield server
    finally:
        server.close()


def test_closing_the_agent_stops_its_stdio_server(stdio: Served) -> None:
    made = agent(stdio.server(), function_call("echo", {"text": "hi"}), text("hi"))

    asyncio.run(run_and_close(made))

    assert not alive(stdio.pid())


def test_run_sync_closes_the_sessions_it_opened(stdio: Served) -> None:
    made = agent(stdio.server(), function_call("echo", {"text": "hi"}), text("hi"))

    first = made.run_sync("go")
    pid = stdio.pid()
    second = made.run_sync("go")

    assert first.status == second.status == "completed"
    assert not alive(pid)  # each run_sync has a loop of its own; its session ends with it
    assert not alive(stdio.pid())


def test_a_read_only_call_to_a_dead_server_is_retried_on_a_new_session(stdio: Served) -> None:
    made = agent(stdio.server(), function_call("add", {"a": 1, "b": 1}), text("2"))

    async def scenario() -> tuple[RunResult, RunResult]:
        async with made:
            first = await made.run("one")
            stdio.kill()  # between runs: the session is dead, nobody knows yet
            return first, await made.run("two")

    first, second = asyncio.run(scenario())

    assert json.loads(results(first)[0].content) == {"sum": 2}
    assert json.loads(results(second)[0].content) == {"sum": 2}  # retried, invisibly
    assert made.mcp.connections["test"].sessions == 2
    assert stdio.calls() == ["add", "add"]


def test_allow_and_prefix_decide_what_the_model_is_offered(stdio: Served) -> None:
    server = stdio.server(allow=["add", "echo"], prefix="calc_")
    model = ScriptedModel([function_call("calc_add", {"a": 1, "b": 2}), text("3")])
    made = Agent(model, mcp=[server], trace_dir=False)

    result = asyncio.run(run_and_close(made))

    offered = {t.name for t in model.calls[0].tools}
    assert offered == {"calc_add", "calc_echo"}
    assert json.loads(results(result)[0].content) == {"sum": 3}
    assert stdio.calls() == ["add"]  # the server's own name reaches the server


def test_a_blocked_tool_is_unknown_to_the_gate(stdio: Served) -> None:
    made = agent(stdio.server(block=["echo"]), function_call("echo", {"text": "x"}), text("no"))

    result = asyncio.run(run_and_close(made))

    assert error_of(results(result)[0])["kind"] == "unknown_tool"
    assert stdio.calls() == []


def test_tools_with_unenforceable_schemas_are_left_out(stdio: Served) -> None:
    made = agent(stdio.server(), text("nothing to do"))

    result = asyncio.run(run_and_close(made))

    assert result.status == "completed"
    assert set(made.mcp.skipped) == {"test.regex", "test.remote"}
    assert "refers outside itself" in made.mcp.skipped["test.remote"]


def test_allowing_a_tool_pi_cannot_check_stops_the_run_with_the_reason(stdio: Served) -> None:
    made = agent(stdio.server(allow=["add", "remote"]), text("unreachable"))

    result = asyncio.run(run_and_close(made))

    assert result.status == "failed"
    assert result.stop_reason == "tool_error"
    assert "mcp.test.remote" in (result.error or "")
    assert result.messages[-1].role == "user"  # the request stays in the conversation


def test_allow_naming_a_tool_the_server_lacks_is_an_error(stdio: Served) -> None:
    made = agent(stdio.server(allow=["add", "multiply"]), text("unreachable"))

    result = asyncio.run(run_and_close(made))

    assert result.stop_reason == "tool_error"
    assert "multiply" in (result.error or "") and "it lists:" in (result.error or "")


def test_a_server_that_cannot_start_ends_the_run_well_formed(tmp_path: Path) -> None:
    missing = MCPServer(name="ghost", command=[str(tmp_path / "no-such-server")])
    made = Agent(ScriptedModel([text("unreachable")]), mcp=[missing], trace_dir=False)

    result = asyncio.run(run_and_close(made))

    assert result.status == "failed"
    assert result.stop_reason == "tool_error"
    assert "ghost" in (result.error or "")


def test_a_tool_name_clash_asks_for_a_prefix(stdio: Served, tmp_path: Path) -> None:
    other = Served("stdio", tmp_path / "other")
    made = Agent(
        ScriptedModel([text("x")]),
        mcp=[stdio.server(name="one"), other.server(name="two")],
        trace_dir=False,
    )

    result = asyncio.run(run_and_close(made))

    assert result.stop_reason == "tool_error"
    assert "set a `prefix`" in (result.error or "")


def test_cut_off_and_oversized_calls_never_reach_the_server(stdio: Served) -> None:
    made = agent(
        stdio.server(),
        function_call("echo", {"text": "cut"}, finish_reason="length"),
        function_call("echo", {"text": "x" * 70_000}),
        text("gave up"),
    )

    result = asyncio.run(run_and_close(made))

    cut, large = results(result)
    assert error_of(cut)["kind"] == "truncated_call"
    assert error_of(large)["kind"] == "arguments_too_large"
    assert stdio.calls() == []


def test_error_results_and_images_read_like_any_tool_result(stdio: Served) -> None:
    made = agent(
        stdio.server(),
        parallel_calls(function_call("fail", id="c1"), function_call("image", id="c2")),
        text("ok"),
    )

    result = asyncio.run(run_and_close(made))

    failed, picture = results(result)
    assert error_of(failed) == {
        "kind": "tool_error",
        "message": "the disk is full",
        "hint": error_of(failed)["hint"],
    }
    assert picture.content == "here it is\n[image: image/png, 1024 bytes]"


def test_results_past_the_byte_limit_are_cut_with_a_marker(stdio: Served) -> None:
    made = agent(
        stdio.server(max_result_bytes=200),
        function_call("echo", {"text": "x" * 1000}),
        text("long"),
    )

    result = asyncio.run(run_and_close(made))

    content = results(result)[0].content
    assert len(content.encode()) <= 200
    assert "truncated" in content and "1000 bytes" in content


def test_non_idempotent_calls_carry_a_stable_key_read_only_ones_none(stdio: Served) -> None:
    made = agent(
        stdio.server(),
        parallel_calls(
            function_call("echo", {"text": "a"}, id="c1"),
            function_call("add", {"a": 1, "b": 1}, id="c2"),
        ),
        text("ok"),
    )

    asyncio.run(run_and_close(made))

    keys = stdio.keys()
    assert keys["add"] == ["-"]
    assert keys["echo"][0].startswith("pi-")


def test_env_references_are_resolved_at_connect_and_never_stored(
    stdio: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_TEST_MCP_TOKEN", "s3cr3t-value-123")
    server = stdio.server(env={"API_TOKEN": "${PI_TEST_MCP_TOKEN}"})
    made = agent(server, function_call("secret_env", {"name": "API_TOKEN"}), text("ok"))

    result = asyncio.run(run_and_close(made))

    assert results(result)[0].content == "length 16"
    assert server.to_table()["env"] == {"API_TOKEN": "${PI_TEST_MCP_TOKEN}"}


def test_a_missing_env_variable_ends_the_run_naming_it(stdio: Served) -> None:
    made = agent(stdio.server(env={"API_TOKEN": "${PI_TEST_NOT_SET_ANYWHERE}"}), text("x"))

    result = asyncio.run(run_and_close(made))

    assert result.stop_reason == "tool_error"
    assert "PI_TEST_NOT_SET_ANYWHERE is not set" in (result.error or "")


# --- HTTP specifics -------------------------------------------------------------------------


def test_a_silent_http_endpoint_cannot_hold_a_run_forever() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)  # connections queue; nothing ever answers them
        port = listening.getsockname()[1]
        server = MCPServer(name="silent", url=f"http://127.0.0.1:{port}/mcp", connect_timeout_s=0.5)
        made = Agent(ScriptedModel([text("unreachable")]), mcp=[server], trace_dir=False)

        result = asyncio.run(run_and_close(made))

    assert result.stop_reason == "tool_error"
    assert "did not start within 0.5s" in (result.error or "")


def test_an_http_server_that_is_down_ends_the_run_naming_it(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    server = MCPServer(name="down", url=f"http://127.0.0.1:{port}/mcp")
    made = Agent(ScriptedModel([text("unreachable")]), mcp=[server], trace_dir=False)

    result = asyncio.run(run_and_close(made))

    assert result.status == "failed" and result.stop_reason == "tool_error"
    assert "'down'" in (result.error or "") and "ConnectError" in (result.error or "")
