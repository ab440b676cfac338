"""A server on 127.0.0.1 answering each POST with the next of its crafted bodies, for the
tests of provider answers of the wrong shape (`test_openai_malformed.py`,
`test_anthropic_malformed.py`), and what those tests share."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pi_runtime import Agent, RunResult, tool
from pi_runtime.models import Model

__all__ = ["serve"]  # the fixture, for `from provider_support import *`; the rest by name


@tool
def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


@dataclass
class Served:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)  # as each came, parsed


Serve = Callable[..., Served]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """`serve(*bodies)`: a server answering the n-th request with the n-th body (the last
    one again after that)."""
    servers: list[ThreadingHTTPServer] = []

    def start(*bodies: bytes) -> Served:
        served = Served(url="")

        class Replies(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                sent = self.rfile.read(int(self.headers.get("content-length", "0")))
                served.requests.append(json.loads(sent))
                body = bodies[min(len(served.requests), len(bodies)) - 1]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Replies)
        # a short poll: shutdown() waits up to one poll (0.5 s by default)
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        servers.append(server)
        served.url = f"http://127.0.0.1:{server.server_address[1]}"
        return served

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def sse(events: list[tuple[str | None, object]], done: bool = False) -> bytes:
    """An event stream; a `str` payload goes out as it is (to send what is no JSON)."""
    lines = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines += ["data: " + (data if isinstance(data, str) else json.dumps(data)), ""]
    if done:
        lines += ["data: [DONE]", ""]
    return ("\n".join(lines) + "\n").encode()


def run(model: Model) -> RunResult:
    return Agent(model, tools=[echo], trace_dir=False).run_sync("echo 北京")


def failed_once_with(result: RunResult, message: str) -> None:
    assert (result.status, result.stop_reason) == ("failed", "model_error"), result.error
    assert result.error == message
    errors = [e for e in result.events if e.kind == "model_error"]
    assert [e.transient for e in errors] == [False]  # type: ignore[attr-defined]
