"""MCP tools that wait for a person: a server's `approval` names its tools whose calls are
held like a Python tool marked `requires_approval`, in memory and in a stored session
decided by `pi approve` in another process. Each test runs a real MCP server
(`mcp_server_app.py`), which records every call it receives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cli_support import pi
from durable_support import *  # noqa: F403
from durable_support import FakeClock
from mcp_support import *  # noqa: F403  (the served fixture)
from mcp_support import APP, Served
from pi_runtime import Agent, Limits, RunResult, UserError
from pi_runtime.durable import Store
from pi_runtime.durable.worker import Worker
from pi_runtime.loop._mcp import listed
from pi_runtime.mcp import MCPServer, MCPTools, ServerUnavailable
from pi_runtime.messages import ToolResultMessage
from pi_runtime.testing import ScriptedModel, function_call, text
from pi_runtime.tools import ToolSpec


def agent(server: MCPServer, *steps: Any) -> Agent:
    return Agent(ScriptedModel(list(steps)), mcp=[server], trace_dir=False, limits=Limits())


def answers(result: RunResult) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in result.messages if isinstance(m, ToolResultMessage)}


def stored_mcp_agent(tmp_path: Path, steps: list[dict[str, Any]], approval: list[str]) -> Path:
    """The agent file of TMP/agent, for a stored session: a scripted model taking `steps`
    and the test server (its state in TMP/state) as `[mcp.test]`, whose `approval` list
    is `approval`."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    command = json.dumps(["python", str(APP), "--state", str(tmp_path / "state")])
    (folder / "agent.toml").write_text(
        'model = "scripted:script.json"\ninstructions = "You use tools."\n'
        f"\n[mcp.test]\ncommand = {command}\napproval = {json.dumps(approval)}\n",
        encoding="utf-8",
    )
    return folder / "agent.toml"


def test_a_call_named_in_a_servers_approval_waits_then_runs_once_approved(
    served: Served,
) -> None:
    made = agent(
        served.server(approval=["echo"]),
        function_call("add", {"a": 2, "b": 3}, id="c1"),  # not named: runs at once
        function_call("echo", {"text": "ship it"}, id="c2"),
        text("done"),
    )

    async def go() -> tuple[RunResult, list[str], RunResult]:
        async with made:
            waiting = await made.run("go")
            before = served.calls()
            return waiting, before, await made.approve(waiting, "c2")

    waiting, before, done = asyncio.run(go())

    assert (waiting.status, waiting.stop_reason) == ("awaiting", "awaiting_approval")
    assert [(p.call_id, p.tool, p.arguments) for p in waiting.pending_approvals] == [
        ("c2", "echo", {"text": "ship it"})
    ]
    assert before == ["add"]  # the held call never reached the server
    assert done.status == "completed" and done.output == "done"
    assert served.calls() == ["add", "echo"]  # once
    assert answers(done)["c2"].content == "ship it"


def test_a_rejected_call_never_reaches_the_server_and_the_model_reads_why(
    served: Served,
) -> None:
    made = agent(
        served.server(approval=["echo"]),
        function_call("echo", {"text": "rm -rf"}, id="c1"),
        text("understood"),
    )

    async def go() -> RunResult:
        async with made:
            waiting = await made.run("go")
            return await made.reject(waiting, "c1", reason="not on prod")

    done = asyncio.run(go())

    assert done.status == "completed"
    refused = json.loads(answers(done)["c1"].content)
    assert refused["kind"] == "rejected" and "not on prod" in refused["message"]
    assert served.calls() == []


def test_edited_arguments_are_checked_against_the_servers_schema(tmp_path: Path) -> None:
    served = Served("stdio", tmp_path / "server")
    made = agent(
        served.server(approval=["echo"]),
        function_call("echo", {"text": "draft"}, id="c1"),
        text("done"),
    )

    async def go() -> RunResult:
        async with made:
            waiting = await made.run("go")
            with pytest.raises(UserError, match="text"):
                await made.approve(waiting, "c1", {"text": 5})
            assert served.calls() == []
            return await made.approve(waiting, "c1", {"text": "final"})

    done = asyncio.run(go())

    assert answers(done)["c1"].content == "final"
    assert served.calls() == ["echo"]


def test_approval_naming_a_tool_the_server_lacks_ends_the_run_naming_it(
    tmp_path: Path,
) -> None:
    served = Served("stdio", tmp_path / "server")
    made = agent(served.server(approval=["launch"]), text("never"))

    async def go() -> RunResult:
        async with made:
            return await made.run("go")

    result = asyncio.run(go())

    assert (result.status, result.stop_reason) == ("failed", "tool_error")
    assert "mcp.test.approval names tools the server does not list: launch" in str(result.error)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"approval": "echo"}, "approval: must be a list of tool names"),
        ({"approval": [""]}, "approval: must be a list of non-empty tool names"),
        ({"approval": ["echo"], "block": ["echo"]}, "echo can never be called"),
        ({"approval": ["echo"], "allow": ["add"]}, "echo can never be called"),
    ],
)
def test_a_bad_approval_list_is_refused_when_the_server_is_configured(
    options: dict[str, Any], words: str
) -> None:
    with pytest.raises(UserError, match=words):
        MCPServer(name="test", command=("python", "x.py"), **options)


def test_the_approval_list_survives_the_stored_table() -> None:
    server = MCPServer(name="test", command=("python", "x.py"), approval=["echo", "add"])

    table = server.to_table()

    assert table["approval"] == ["echo", "add"]
    assert MCPServer.from_table("test", table) == server


def test_an_agents_own_approval_cannot_name_a_servers_tool_and_says_where_it_goes(
    tmp_path: Path,
) -> None:
    server = Served("stdio", tmp_path / "server").server()

    with pytest.raises(UserError, match=r"echo \(an MCP server's tools go in its own `approval`"):
        Agent(ScriptedModel([]), mcp=[server], approval=["echo"], trace_dir=False)


def test_a_stored_session_waits_and_pi_approve_in_another_process_runs_the_call_once(
    db_url: str, tmp_path: Path
) -> None:
    steps = [
        {"tool_calls": [{"name": "echo", "arguments": {"text": "ship it"}}]},
        {"text": "shipped"},
    ]
    agent_file = stored_mcp_agent(tmp_path, steps, ["echo"])
    calls = tmp_path / "state" / "calls"

    ran = pi("run", "ship", "--agent", str(agent_file), "--session", "s1",
             "--db", db_url, "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    waiting = json.loads(ran.stdout)
    assert waiting["stop_reason"] == "awaiting_approval"
    (pending,) = waiting["pending_approvals"]
    assert (pending["tool"], pending["arguments"]) == ("echo", {"text": "ship it"})
    assert not calls.exists()  # held: the server never saw it

    done = pi("approve", "s1", pending["call_id"], "--db", db_url, "--json", tmp=tmp_path,
              process=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["output"]) == ("completed", "shipped")
    assert calls.read_text(encoding="utf-8").split()[0::2] == ["echo"]  # once

    again = pi("approve", "s1", pending["call_id"], "--db", db_url, tmp=tmp_path)
    assert again.returncode == 2 and "already approved" in again.stderr
    assert calls.read_text(encoding="utf-8").split()[0::2] == ["echo"]


@pytest.mark.parametrize(
    ("tool", "arguments", "reaches_server"),
    [
        ("wide", {"filter": {"city": "Oslo"}}, True),  # idempotent: run again, by the worker
        ("echo", {"text": "ship it"}, False),  # not: its outcome is unknown, never rerun
    ],
)
def test_a_worker_taking_over_an_approved_call_whose_approver_died_reaches_the_server(
    store: Store,
    db_url: str,
    clock: FakeClock,
    tmp_path: Path,
    tool: str,
    arguments: dict[str, Any],
    reaches_server: bool,
) -> None:
    steps = [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": "over"}]
    agent_file = stored_mcp_agent(tmp_path, steps, [tool])
    calls = tmp_path / "state" / "calls"
    ran = pi("run", "go", "--agent", str(agent_file), "--session", "s1",
             "--db", db_url, "--json", tmp=tmp_path)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    (pending,) = json.loads(ran.stdout)["pending_approvals"]
    # an approver took the decision, then died before the call ran or its lease ended
    store.approve_call(
        "s1",
        pending["call_id"],
        arguments=pending["arguments"],
        fingerprint=pending["fingerprint"],
        owner="approver-that-died",
        lease_s=30,
        retry_safe=reaches_server,
    )
    clock.now += timedelta(minutes=5)

    stats = asyncio.run(Worker(store, poll_s=0.01, trace_dir=False).run(once=True))

    assert dict(stats.runs) == {"completed": 1}
    session = store.get_session("s1")
    assert session is not None and session.status == "completed"
    (answer,) = [
        m.message
        for m in store.load_messages("s1")
        if isinstance(m.message, ToolResultMessage) and m.message.tool_call_id == pending["call_id"]
    ]
    if reaches_server:
        assert dict(stats.jobs) == {"succeeded": 1}
        assert calls.read_text(encoding="utf-8").split()[0::2] == [tool]  # once, by the worker
        assert not answer.is_error and "Oslo" in answer.content
    else:
        assert not calls.exists()
        assert answer.is_error and answer.error is not None
        assert answer.error.kind == "outcome_unknown"


class _Unlistable(MCPTools):
    """Servers whose listing fails with `reason` (as one quoting the names it listed)."""

    def __init__(self, reason: str) -> None:
        super().__init__([])
        self.reason = reason

    def __bool__(self) -> bool:
        return True

    async def specs(self, taken: Collection[str] = ()) -> tuple[ToolSpec, ...]:
        raise ServerUnavailable(self.reason)


def test_a_listing_failure_quoting_hostile_names_reads_back_repaired() -> None:
    # a server names its own tools: the reason `approval` or `allow` gives may quote them
    reason = "mcp.test.approval names tools the server does not list: x (it lists: bad\ud800)"

    specs, why = asyncio.run(listed(_Unlistable(reason), ()))

    assert specs == () and why is not None
    assert "\ud800" not in why and "bad\ufffd" in why
    why.encode("utf-8")  # printable, storable, traceable
