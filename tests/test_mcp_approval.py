"""MCP tools that wait for a person: a server's `approval` names its tools whose calls are
held like a Python tool marked `requires_approval`, in memory and in a stored session
decided by `pi approve` in another process. Each test runs a real MCP server
(`mcp_server_app.py`), which records every call it receives."""

from __future__ import annotations

import asyncio
import json
import shutil
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


def stored_mcp_agent(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    approval: list[str],
    *,
    program: Path = APP,
    env: dict[str, str] | None = None,
) -> Path:
    """The agent file of TMP/agent, for a stored session: a scripted model taking `steps`
    and the test server `program` (its state in TMP/state) as `[mcp.test]`, whose
    `approval` list is `approval` and whose `env` is `env`."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    command = json.dumps(["python", str(program), "--state", str(tmp_path / "state")])
    table = f"command = {command}\napproval = {json.dumps(approval)}\n"
    if env:
        table += "env = {" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + "}\n"
    head = 'model = "scripted:script.json"\ninstructions = "You use tools."\n'
    (folder / "agent.toml").write_text(f"{head}\n[mcp.test]\n{table}", encoding="utf-8")
    return folder / "agent.toml"


def approved_by_an_approver_that_died(
    store: Store,
    clock: FakeClock,
    db_url: str,
    agent_file: Path,
    tmp_path: Path,
    *,
    retry_safe: bool,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Session s1 of `agent_file` run until its one call waits, then approved by an approver
    that died before the call ran, its lease over: the pending call, for a worker to take."""
    ran = pi("run", "go", "--agent", str(agent_file), "--session", "s1",
             "--db", db_url, "--json", tmp=tmp_path, env=env)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    (pending,) = json.loads(ran.stdout)["pending_approvals"]
    store.approve_call(
        "s1",
        pending["call_id"],
        arguments=pending["arguments"],
        fingerprint=pending["fingerprint"],
        owner="approver-that-died",
        lease_s=30,
        retry_safe=retry_safe,
    )
    clock.now += timedelta(minutes=5)
    return dict(pending)


def stored_answer(store: Store, call_id: str) -> ToolResultMessage:
    """The one stored message of session s1 answering call `call_id`."""
    (answer,) = [
        m.message
        for m in store.load_messages("s1")
        if isinstance(m.message, ToolResultMessage) and m.message.tool_call_id == call_id
    ]
    return answer


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
    # an approver took the decision, then died before the call ran or its lease ended
    pending = approved_by_an_approver_that_died(
        store, clock, db_url, agent_file, tmp_path, retry_safe=reaches_server
    )

    stats = asyncio.run(Worker(store, poll_s=0.01, trace_dir=False).run(once=True))

    assert dict(stats.runs) == {"completed": 1}
    session = store.get_session("s1")
    assert session is not None and session.status == "completed"
    answer = stored_answer(store, pending["call_id"])
    if reaches_server:
        assert dict(stats.jobs) == {"succeeded": 1}
        assert calls.read_text(encoding="utf-8").split()[0::2] == [tool]  # once, by the worker
        assert not answer.is_error and "Oslo" in answer.content
    else:
        assert not calls.exists()
        assert answer.is_error and answer.error is not None
        assert answer.error.kind == "outcome_unknown"


def test_a_worker_that_cannot_start_the_mcp_server_of_a_call_it_takes_over_says_so(
    store: Store,
    db_url: str,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # not "unknown tool, start the worker with --tools": the tool is the server's
    token = "sk-mcp-worker-0123456789abcdefghij"
    program = tmp_path / "server.py"
    shutil.copy(APP, program)
    steps = [
        {"tool_calls": [{"name": "wide", "arguments": {"filter": {"city": "Oslo"}}}]},
        {"text": "over"},
    ]
    agent_file = stored_mcp_agent(
        tmp_path, steps, ["wide"], program=program, env={"API_TOKEN": "${PI_TEST_MCP_TOKEN}"}
    )
    secret = {"PI_TEST_MCP_TOKEN": token}
    pending = approved_by_an_approver_that_died(
        store, clock, db_url, agent_file, tmp_path, retry_safe=True, env=secret
    )
    program.unlink()  # the server's program is not where this worker runs
    monkeypatch.setenv("PI_TEST_MCP_TOKEN", token)

    stats = asyncio.run(Worker(store, poll_s=0.01, trace_dir=False).run(once=True))
    again = asyncio.run(Worker(store, poll_s=0.01, trace_dir=False).run(once=True))

    assert dict(stats.jobs) == {"failed": 1} and not again.jobs and not again.runs
    (job,) = store.list_jobs("s1")
    assert (job.status, job.attempts) == ("failed", 2)  # the approver's, this one's: no more
    assert not (tmp_path / "state" / "calls").exists()
    answer = stored_answer(store, pending["call_id"])
    assert answer.is_error and answer.error is not None
    assert answer.error.kind == "unknown_tool"  # the wire kind stays
    assert "MCP server 'test'" in answer.error.message
    assert "MCP servers cannot be reached" in answer.error.message
    assert "MCP servers" in answer.error.hint
    assert "start or reach those servers as the agent file configures them" in answer.error.hint
    assert "--tools" not in answer.content
    # the run after it cannot list the server either: it ends well-formed, saying why,
    # with the call answered once
    after = max(store.list_runs("s1"), key=lambda run: run.created_at)
    assert (after.status, after.stop_reason) == ("failed", "tool_error")
    assert after.result is not None and "MCP server 'test'" in str(after.result["error"])
    messages = [m.message for m in store.load_messages("s1")]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == [pending["call_id"]]
    stored = json.dumps([str(m) for m in messages]) + json.dumps(after.result)
    assert token not in stored and "sk-mcp-worker" not in stored


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
