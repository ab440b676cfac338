"""`pi serve` with an agent whose tools come from an MCP server: the turn's agent opens
the server's session, and the server process is gone once the turn ends (a server that
builds an agent per turn must not leave one MCP subprocess behind per request)."""

from __future__ import annotations

from pathlib import Path

import httpx

from mcp_support import alive, wait_for
from serve_support import ServeProcess
from test_mcp_cli import agent_file, call, stdio_table


def test_a_served_turn_closes_its_mcp_servers_session(tmp_path: Path) -> None:
    state = tmp_path / "state"
    steps = [call("add", a=2, b=3), {"text": "5"}]
    agent = agent_file(tmp_path, steps, stdio_table(state))
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    with (
        ServeProcess("--agent", f"calc={agent}", "--db", db, cwd=tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        ran = client.post("/v1/sessions/m1/runs", json={"message": "2 + 3?"})
        assert ran.status_code == 200, ran.text
        result = ran.json()
        assert result["stop_reason"] == "final_answer", result
        (tool,) = [m for m in result["messages"] if m["role"] == "tool"]
        assert not tool["is_error"], tool
        pid = int((state / "pid").read_text(encoding="utf-8"))
        # the server still serves; the MCP subprocess of the finished turn is gone
        wait_for(lambda: not alive(pid), what=f"MCP server {pid} to exit")
        assert client.get("/v1/sessions/m1").json()["status"] == "completed"
