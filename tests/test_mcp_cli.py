"""MCP from the command line: agent files with `[mcp.NAME]` run by `pi run` and by a
worker in another process, their secrets kept out of stores and traces; and
`pi mcp serve`, an agent served to a real MCP client of the SDK."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli_support import PI, pi
from durable_support import *  # noqa: F403
from mcp_support import APP

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp" / "agent.toml"
SECRET = "tok-9f8e7d6c5b4a"

TOOLS = '''\
from pi_runtime import tool


@tool(background=True)
def lookup(key: str) -> dict:
    """Look a key up (slowly, in the background)."""
    return {"key": key, "value": 42}


TOOLS = [lookup]
'''


def agent_file(tmp: Path, steps: list[dict[str, Any]], mcp: str, *, tools: bool = False) -> Path:
    folder = tmp / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    head = 'model = "scripted:script.json"\ninstructions = "You use tools."\n'
    if tools:
        (folder / "mcptesttools.py").write_text(TOOLS, encoding="utf-8")
        head += 'tools = ["mcptesttools:TOOLS"]\n'
    path = folder / "agent.toml"
    path.write_text(head + mcp, encoding="utf-8")
    return path


def stdio_table(state: Path, extra: str = "") -> str:
    command = json.dumps(["python", str(APP), "--state", str(state)])
    return f"\n[mcp.test]\ncommand = {command}\ntimeout_s = 20\n{extra}"


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def test_the_example_agent_file_runs_with_its_mcp_server(tmp_path: Path) -> None:
    ran = pi("run", "How far is a marathon in miles? Note it.", "--agent", str(EXAMPLE),
             "--json", tmp=tmp_path, process=True)  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "completed"
    tools = [m for m in result["messages"] if m["role"] == "tool"]
    assert [m["name"] for m in tools] == ["desk_convert", "desk_add_note"]
    assert json.loads(tools[0]["content"]) == {"result": 26.219}
    assert "Traceback" not in ran.stderr


def test_a_worker_continuation_rebuilds_the_sessions_mcp_server(
    db_url: str, tmp_path: Path
) -> None:
    steps = [
        call("lookup", key="k1"),  # background: the run ends awaiting
        call("secret_env", name="API_TOKEN"),  # run by the worker's continuation
        {"text": "done"},
    ]
    table = stdio_table(tmp_path / "state", 'env = {API_TOKEN = "${PI_TEST_MCP_SECRET}"}\n')
    agent = agent_file(tmp_path, steps, table, tools=True)
    env = {"PI_TEST_MCP_SECRET": SECRET}

    ran = pi("run", "look k1 up", "--agent", str(agent), "--session", "s1", "--db", db_url,
             "--json", tmp=tmp_path, env=env)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    pi("worker", "--once", "--db", db_url, "--poll", "0.05", tmp=tmp_path,
       process=True, env=env, expect=0)  # fmt: skip

    shown = pi("session", "show", "s1", "--db", db_url, "--json", tmp=tmp_path)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["status"] == "completed"
    answers = [m["content"] for m in view["messages"] if m.get("name") == "secret_env"]
    assert answers == [f"length {len(SECRET)}"]  # resolved in the worker's process
    # the store and the traces hold the reference, never the value
    assert SECRET not in shown.stdout
    traces = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "traces").rglob("*"))
    assert traces and SECRET not in traces
    if db_url.startswith("sqlite:///"):
        stored = Path(db_url.removeprefix("sqlite:///")).read_bytes()
        assert b"${PI_TEST_MCP_SECRET}" in stored and SECRET.encode() not in stored


def test_a_literal_secret_in_an_agent_file_is_refused_at_its_line(tmp_path: Path) -> None:
    table = stdio_table(tmp_path / "state", 'env = {API_TOKEN = "plain-text-token"}\n')
    agent = agent_file(tmp_path, [{"text": "x"}], table)

    ran = pi("run", "x", "--agent", str(agent), tmp=tmp_path)

    assert ran.returncode == 2
    assert "agent.toml:" in ran.stderr and "mcp.test.env.API_TOKEN" in ran.stderr
    assert "${MY_VAR}" in ran.stderr


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('[mcp.x]\ncommand = ["a"]\nurl = "http://127.0.0.1:1/mcp"\n', "exactly one of"),
        ('[mcp.x]\nurl = "ftp://example.org"\n', "http:// or https://"),
        ('[mcp.x]\ncommand = ["a"]\ntimeout = 3\n', "mcp.x.timeout: unknown key"),
        ('[mcp.x]\ncommand = "python server.py"\n', "mcp.x.command: a list"),
        ('[mcp.x]\ncommand = ["a"]\ntimeout_s = 0\n', "mcp.x.timeout_s: must be a positive"),
        ('[mcp.x]\ncommand = ["a"]\nprefix = "9bad"\n', "mcp.x.prefix"),
        ('[mcp."bad name"]\ncommand = ["a"]\n', "1-64 letters"),
        ('[mcp.x]\nurl = "https://user:pw@example.org/mcp"\n', "credentials"),
    ],
)
def test_a_bad_mcp_table_is_one_clear_error(tmp_path: Path, table: str, words: str) -> None:
    agent = agent_file(tmp_path, [{"text": "x"}], "\n" + table)

    ran = pi("run", "x", "--agent", str(agent), tmp=tmp_path)

    assert ran.returncode == 2
    assert words in ran.stderr
    assert "Traceback" not in ran.stderr


# --- pi mcp serve ----------------------------------------------------------------------


def served_agent(tmp: Path, steps: list[dict[str, Any]], extra: str = "") -> Path:
    folder = tmp / "served"
    folder.mkdir(exist_ok=True)
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    path = folder / "capital.toml"
    path.write_text(
        'model = "scripted:script.json"\ninstructions = "You name capitals."\n' + extra,
        encoding="utf-8",
    )
    return path


async def with_client(agent: Path, tmp: Path, work: Any) -> Any:
    from mcp import Client, StdioServerParameters

    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PI_TRACE_DIR": str(tmp / "traces")}
    params = StdioServerParameters(
        command=str(PI), args=["mcp", "serve", "--agent", str(agent)], env=env, cwd=str(tmp)
    )
    with (tmp / "serve.stderr").open("w") as errors:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=errors), read_timeout_seconds=60) as client:
            return await work(client)


def test_pi_mcp_serve_offers_the_agent_as_one_tool(tmp_path: Path) -> None:
    agent = served_agent(tmp_path, [{"text": "Paris."}])

    async def work(client: Any) -> Any:
        listed = await client.list_tools()
        answered = await client.call_tool("capital", {"task": "Capital of France?"})
        again = await client.call_tool("capital", {"task": "And once more?"})
        return listed, answered, again

    listed, answered, again = asyncio.run(with_client(agent, tmp_path, work))

    (tool,) = listed.tools
    assert tool.name == "capital"
    assert tool.input_schema["required"] == ["task"]
    assert tool.input_schema["additionalProperties"] is False
    assert not answered.is_error
    assert answered.content[0].text == "Paris."
    assert again.content[0].text == "Paris."  # a fresh conversation per call


def test_pi_mcp_serve_refuses_bad_arguments_and_reports_a_failed_run(tmp_path: Path) -> None:
    steps = [{"tool_calls": [{"name": "nothing", "arguments": {}}]}] * 3
    agent = served_agent(tmp_path, steps, "\n[limits]\nmax_steps = 1\n")

    async def work(client: Any) -> Any:
        return [
            await client.call_tool("capital", {}),
            await client.call_tool("capital", {"task": "x", "extra": 1}),
            await client.call_tool("capital", {"task": "   "}),
            await client.call_tool("capital", {"task": "Capital of Peru?"}),
        ]

    missing, extra, blank, stopped = asyncio.run(with_client(agent, tmp_path, work))

    for refused in (missing, extra, blank):
        assert refused.is_error
        assert '{"task":' in refused.content[0].text
    assert stopped.is_error
    assert "max_steps" in stopped.content[0].text


def test_pi_mcp_serve_chains_to_an_agent_with_its_own_mcp_server(tmp_path: Path) -> None:
    async def work(client: Any) -> Any:
        return await client.call_tool("agent", {"task": "A marathon in miles?"})

    answered = asyncio.run(with_client(EXAMPLE, tmp_path, work))

    assert not answered.is_error, answered.content
    assert "26.219 miles" in answered.content[0].text


def test_pi_mcp_serve_without_an_agent_file_fails_clearly(tmp_path: Path) -> None:
    ran = pi("mcp", "serve", "--agent", str(tmp_path / "none.toml"), tmp=tmp_path)

    assert ran.returncode == 2
    assert "cannot read it" in ran.stderr
