"""Real `pi serve` servers for the tests, on 127.0.0.1 and an ephemeral port: in this
process (uvicorn on a thread, `ThreadServer`) or as the console script in a subprocess
(`ServeProcess`). Both are context managers that wait until the server answers and stop
it (SIGTERM for the subprocess) on exit. `sse_events` reads an AG-UI stream.

    with ThreadServer(create_app(config)) as server:
        httpx.post(f"{server.url}/v1/sessions/s1/runs", json={"message": "hi"})
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from cli_support import QUIET

PI = Path(sys.executable).parent / "pi"
REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 60.0

AGENT = """
model = "scripted:script.json"
tools = ["{module}:TOOLS"]
instructions = "You answer questions about orders."
[limits]
max_steps = 6
"""
TOOLS = '''
"""Tools of the serve tests: a lookup, and a gate that holds a call until a file exists."""
import time
from pathlib import Path
from pi_runtime import tool

@tool
def lookup(order_id: str) -> dict:
    """An order's total.

    Args:
        order_id: the order.
    """
    return {"order_id": order_id, "total": 80}

@tool(timeout_s=120)
def hold(name: str) -> str:
    """Wait until the test opens the gate file `name` beside this module.

    Args:
        name: the gate file's name.
    """
    gate = Path(__file__).with_name(name)
    while not gate.exists():
        time.sleep(0.02)
    return "released"

TOOLS = [lookup, hold]
'''


def write_agent(folder: Path, steps: list[dict[str, Any]], name: str = "agent") -> Path:
    """An agent file `NAME.toml` in `folder` running the scripted `steps` with the tools
    above (`lookup`, `hold`), in a module of its own name (a process imports each once)."""
    folder.mkdir(parents=True, exist_ok=True)
    module = f"servetools_{uuid.uuid4().hex[:12]}"
    (folder / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    (folder / "script.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    path = folder / f"{name}.toml"
    path.write_text(AGENT.replace("{module}", module), encoding="utf-8")
    return path


LOOKUP_THEN_ANSWER = [
    {
        "text": "Looking it up.",
        "tool_calls": [{"name": "lookup", "arguments": {"order_id": "A-1"}}],
        "usage": {"input_tokens": 100, "output_tokens": 20},
    },
    {"text": "Order A-1 totals 80.", "usage": {"input_tokens": 150, "output_tokens": 10}},
]


class ThreadServer:
    """uvicorn serving `app` on a thread of this process."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + DEADLINE_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(DEADLINE_S)


class ServeProcess:
    """`pi serve ARGS --port 0` as a subprocess in `cwd`."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.args = [str(PI), "serve", *args, "--port", "0"]
        self.cwd = cwd
        self.env = {**os.environ, **QUIET, **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "src"), str(REPO), self.env.get("PYTHONPATH")) if p
        )
        self.log = cwd / "serve.log"
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServeProcess:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                self.args, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + DEADLINE_S
        while True:
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", self.output())
            if found:
                self.url = found.group(1)
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pi serve did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON events of an AG-UI server-sent event stream, as they arrive."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def run_sse(
    client: httpx.Client, url: str, body: dict[str, Any], **kw: Any
) -> list[dict[str, Any]]:
    """POST `body` asking for AG-UI events; all of them."""
    headers = {"Accept": "text/event-stream", **kw.pop("headers", {})}
    with client.stream("POST", url, json=body, headers=headers, **kw) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(response))


def wait_for(check: Any, what: str, timeout_s: float = DEADLINE_S) -> Any:
    """Poll `check()` until it returns something truthy (and return that)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def well_formed(events: list[dict[str, Any]]) -> None:
    """Assert the AG-UI rules the server promises: RUN_STARTED first, one terminal event
    last, steps and text messages and tool calls opened before they close, each closed."""
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED", types
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR"), types
    assert sum(t in ("RUN_FINISHED", "RUN_ERROR") for t in types) == 1, types
    steps: list[str] = []
    texts: set[str] = set()
    calls: set[str] = set()
    for e in events:
        if e["type"] == "STEP_STARTED":
            steps.append(e["stepName"])
        elif e["type"] == "STEP_FINISHED":
            assert e["stepName"] in steps, (e, types)
            steps.remove(e["stepName"])
        elif e["type"] == "TEXT_MESSAGE_START":
            texts.add(e["messageId"])
        elif e["type"] in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert e["messageId"] in texts, (e, types)
            if e["type"] == "TEXT_MESSAGE_END":
                texts.remove(e["messageId"])
        elif e["type"] == "TOOL_CALL_START":
            calls.add(e["toolCallId"])
        elif e["type"] in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert e["toolCallId"] in calls, (e, types)
            if e["type"] == "TOOL_CALL_END":
                calls.remove(e["toolCallId"])
    assert not steps and not texts and not calls, (steps, texts, calls)
