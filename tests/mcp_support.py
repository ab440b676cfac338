"""Real MCP servers for the MCP tests: `mcp_server_app.py` over stdio or over HTTP.

`Served` hands a test an `MCPServer` pointing at a fresh server of either transport and
reads back what the server wrote (calls it received, sessions opened, its pid), so a
test can tell what reached the server and kill it mid-call. The HTTP server listens on
a socket this process bound to an ephemeral port of 127.0.0.1 and passed down, so a
restarted server takes over the same address without a race.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_runtime.mcp import MCPServer

__all__ = ["served"]  # the fixture, for `from mcp_support import *`; the rest by name

APP = Path(__file__).with_name("mcp_server_app.py")


def wait_for(check: Any, *, seconds: float = 30.0, what: str = "the condition") -> Any:
    """Poll `check()` until it returns something truthy (no test asserts on time)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


class Served:
    """One test's MCP server of `transport` (`stdio` or `http`), its state in `state`."""

    def __init__(self, transport: str, state: Path) -> None:
        self.transport = transport
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        if transport == "http":
            self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._socket.bind(("127.0.0.1", 0))
            self._socket.listen(64)
            self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/mcp"
            self.start()

    def server(self, name: str = "test", **options: Any) -> MCPServer:
        if self.transport == "stdio":
            command = ["python", str(APP), "--state", str(self.state)]
            return MCPServer(name=name, command=command, **options)
        return MCPServer(name=name, url=self.url, **options)

    def start(self) -> None:
        """Start the HTTP server (again) on the same socket."""
        assert self._socket is not None
        (self.state / "pid").unlink(missing_ok=True)
        fd = self._socket.fileno()
        with (self.state / "stderr").open("ab") as errors:
            self._process = subprocess.Popen(
                [sys.executable, str(APP), "--state", str(self.state), "--http-fd", str(fd)],
                pass_fds=(fd,),
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )

    def pid(self) -> int:
        return int(wait_for(lambda: _read(self.state / "pid"), what="the server's pid file"))

    def kill(self) -> None:
        """Kill the server process now (SIGKILL), wherever it is."""
        pid = self.pid()
        if self._process is not None and self._process.pid == pid:
            self._process.kill()
            self._process.wait(timeout=30)
        else:
            os.kill(pid, signal.SIGKILL)
        (self.state / "pid").unlink(missing_ok=True)

    def revive(self) -> None:
        """After `kill`: an HTTP server is started again (Pi restarts a stdio one)."""
        if self.transport == "http":
            self.start()

    def calls(self) -> list[str]:
        """The tools the server was asked to run, in order, across restarts."""
        return [line.split(" ")[0] for line in _lines(self.state / "calls")]

    def keys(self) -> dict[str, list[str]]:
        """Idempotency keys received, by tool (`-`: none)."""
        out: dict[str, list[str]] = {}
        for line in _lines(self.state / "calls"):
            tool, _, key = line.partition(" ")
            out.setdefault(tool, []).append(key)
        return out

    def handshakes(self) -> int:
        """Sessions opened: stdio processes started, or HTTP session handshakes."""
        return len(_lines(self.state / "handshakes"))

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30)
        if self._socket is not None:
            self._socket.close()


@pytest.fixture(params=["stdio", "http"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """A fresh server of each transport (import it into a test module to use it)."""
    server = Served(request.param, tmp_path / "server")
    try:
        yield server
    finally:
        server.close()


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    return bool(stat) and stat.rpartition(")")[2].split()[0] != "Z"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def _lines(path: Path) -> list[str]:
    text = _read(path)
    return text.splitlines() if text else []
