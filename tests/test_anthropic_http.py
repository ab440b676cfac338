"""The Anthropic adapter over real HTTP on 127.0.0.1: a keep-alive server replaying a
recorded stream, and an agent run twice with `run_sync` (a new event loop each time)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pi_runtime import Agent
from pi_runtime.models.anthropic import AnthropicModel

STREAM = (Path(__file__).parent / "recordings" / "anthropic" / "final_answer.txt").read_bytes()


class _Replay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep connections open, as real APIs do

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(STREAM)))
        self.end_headers()
        self.wfile.write(STREAM)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    # a short poll: shutdown() waits up to one poll (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_one_model_serves_runs_on_different_event_loops(server_url: str) -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="sk-test", base_url=server_url)
    agent = Agent(model, trace_dir=False)
    first = agent.run_sync("hello")
    second = agent.run_sync("hello again")  # a pooled client would hold the first loop's sockets
    assert (first.status, second.status) == ("completed", "completed"), (first.error, second.error)
    assert first.output and first.output == second.output
