"""`pi serve` as the console script: a real process on 127.0.0.1, real HTTP, a second
process (`pi worker`) delivering a background job, refusals before anything listens (one
in a process of its own, the rest in this one), and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli_support import pi_inprocess, pi_process
from durable_support import *  # noqa: F403  (db_url: SQLite and PostgreSQL)
from serve_support import LOOKUP_THEN_ANSWER, REPO, ServeProcess, wait_for, write_agent

JOBS = str(REPO / "examples" / "jobs" / "agent.toml")
TOKEN = "process-token-0123456789"


def test_a_served_agent_answers_over_http_with_a_token_that_is_never_logged(tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER)
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    with ServeProcess(
        "--agent", f"shop={agent}", "--db", db, cwd=tmp_path, env={"PI_SERVE_TOKEN": TOKEN}
    ) as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            url = "/v1/sessions/p1/runs"
            assert client.post(url, json={"message": "x"}).status_code == 401
            wrong = {"Authorization": "Bearer wrong-token-0123456789"}
            assert client.post(url, json={"message": "x"}, headers=wrong).status_code == 401
            good = {"Authorization": f"Bearer {TOKEN}"}
            ran = client.post(url, json={"message": "total?", "agent": "shop"}, headers=good)
            assert ran.status_code == 200 and ran.json()["output"] == "Order A-1 totals 80."
        code = server.stop()
        log = server.output()
    # drained, then ended by the signal as uvicorn re-raises it (0 where it does not)
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log, log
    assert "POST /v1/sessions/p1/runs" in log  # the access log is on …
    assert TOKEN not in log and "wrong-token" not in log  # … and shows no token
    # the session is in the store for every other Pi process
    shown = pi_process("session", "show", "p1", "--db", db, "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "completed"


def test_a_second_worker_process_delivers_the_background_job(tmp_path: Path, db_url: str) -> None:
    with (
        ServeProcess("--agent", JOBS, "--db", db_url, "--workers", "0", cwd=tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        ran = client.post("/v1/sessions/jobs-1/runs", json={"message": "ACME 均线交叉"})
        assert ran.json()["stop_reason"] == "awaiting_tool"
        (wait,) = ran.json()["waits"]
        assert client.get("/v1/sessions/jobs-1").json()["status"] == "awaiting_server_tool"

        worker = pi_process("worker", "--once", "--db", db_url, "--json", cwd=tmp_path)
        assert worker.returncode == 0, worker.stderr
        assert json.loads(worker.stdout)["deliveries"] == {"delivered": 1}

        session = client.get("/v1/sessions/jobs-1").json()
        assert session["status"] == "completed"
        answered = [m for m in session["messages"] if m.get("tool_call_id") == wait["tool_call_id"]]
        assert len(answered) == 1 and "golden_crosses" in answered[0]["content"]
        continuation = session["runs"][-1]
        assert continuation["kind"] == "server_result" and continuation["status"] == "completed"
        trace = client.get(f"/v1/runs/{continuation['run_id']}/trace")
        assert trace.status_code == 200  # the worker wrote it in the same folder


def test_the_servers_own_worker_delivers_the_background_job(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'pi.db'}"
    with (
        ServeProcess("--agent", JOBS, "--db", db, cwd=tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        ran = client.post("/v1/sessions/jobs-2/runs", json={"message": "ACME 均线交叉"})
        assert ran.json()["stop_reason"] == "awaiting_tool"
        session = wait_for(
            lambda: (s := client.get("/v1/sessions/jobs-2").json())["status"] == "completed" and s,
            "the in-process worker",
        )
    assert [r["kind"] for r in session["runs"]] == ["user", "server_result"]


@pytest.mark.parametrize(
    ("host", "pi"),
    [
        ("0.0.0.0", pi_process),  # the console script itself exits before listening
        ("::", pi_inprocess),
        ("192.0.2.7", pi_inprocess),
        ("example.com", pi_inprocess),
    ],
)
def test_a_public_host_without_a_token_is_refused_before_listening(
    tmp_path: Path, host: str, pi: Callable[..., Any]
) -> None:
    agent = write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER)
    ran = pi("serve", "--agent", str(agent), "--host", host, cwd=tmp_path)
    assert ran.returncode == 2
    assert "--token" in ran.stderr and "reachable from other machines" in ran.stderr
    assert "Uvicorn running" not in ran.stderr


def test_bad_serve_flags_are_refused_with_a_reason_and_no_token_echoed(tmp_path: Path) -> None:
    agent = str(write_agent(tmp_path / "shop", LOOKUP_THEN_ANSWER))
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"short": "acme", ')  # not JSON
    cases = [
        (["--token", TOKEN, "--tokens", str(tokens)], "not both"),
        (["--tokens", str(tokens)], "not valid JSON"),
        (["--token", "short"], "at least 16 characters"),
        (["--agent", str(tmp_path / "missing.toml")], "cannot read it"),
        (["--agent", f"bad name={agent}"], "must be 1-64 letters"),
        (["--agent", agent], "two agents are named"),
        (["--db", "mysql://nowhere/x"], "sqlite"),
    ]
    for extra, message in cases:  # in this process: each is refused before any listening
        ran = pi_inprocess("serve", "--agent", agent, *extra, cwd=tmp_path)
        assert ran.returncode == 2, (extra, ran.stderr)
        assert message in ran.stderr, (extra, ran.stderr)
        assert 'short"' not in ran.stderr and "Traceback" not in ran.stderr
    tokens.write_text(json.dumps({TOKEN: "not a tenant!"}))
    ran = pi_inprocess("serve", "--agent", agent, "--tokens", str(tokens), cwd=tmp_path)
    assert ran.returncode == 2 and "the tenant must be" in ran.stderr and TOKEN not in ran.stderr


def test_importing_pi_or_asking_for_serve_help_loads_no_web_stack() -> None:
    code = (
        "import sys, contextlib, io; sys.argv = ['pi', 'serve', '--help']\n"
        "import pi_runtime\n"
        "from pi_runtime.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        "print([m for m in ('fastapi', 'starlette', 'uvicorn', 'ag_ui') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_without_the_serve_extra_pi_serve_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None  # as if it were not installed\n"
        f"sys.argv = ['pi', 'serve', '--agent', {str(tmp_path / 'a.toml')!r}]\n"
        "from pi_runtime.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'pi-runtime[serve]'" in done.stderr and "Traceback" not in done.stderr
