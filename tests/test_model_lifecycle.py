"""A model keeps one HTTP client for its life, bound to the event loop it runs on:
calls on one loop share a keep-alive connection, `run_sync` closes what its loop opened,
and `async with Agent(...)` / `aclose()` close the model. Served by a keep-alive server
on 127.0.0.1 that records which connection each request came on and when one closes."""

from __future__ import annotations

import asyncio
import gzip
import inspect
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent, Limits
from pi_runtime.models import Model
from pi_runtime.models.anthropic import AnthropicModel
from pi_runtime.models.openai import OpenAIModel
from pi_runtime.models.providers import custom_server

ANTHROPIC_STREAM = (
    Path(__file__).parent / "recordings" / "anthropic" / "final_answer.txt"
).read_bytes()


def _chunk(delta: dict[str, object], finish: str | None, **extra: object) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


OPENAI_STREAM = (
    _chunk({"role": "assistant", "content": "sunny"}, None)
    + _chunk({}, "stop", usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})
    + b"data: [DONE]\n\n"
)


class Server:
    """Which connection (client port) each request used, and which connections closed."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.closed: list[int] = []
        self.changed = threading.Condition()
        self.url = ""

    def wait_closed(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.closed) >= count, timeout=30)


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Replay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep connections open, as real APIs do

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            stream = OPENAI_STREAM if "chat/completions" in self.path else ANTHROPIC_STREAM
            server.ports.append(self.client_address[1])
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(stream)))
            self.end_headers()
            self.wfile.write(stream)

        def finish(self) -> None:
            super().finish()
            with server.changed:
                server.closed.append(self.client_address[1])
                server.changed.notify_all()

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Replay


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    # a short poll: shutdown() waits up to one poll (0.5 s by default)
    thread = threading.Thread(target=http.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{http.server_address[1]}"
    try:
        yield state
    finally:
        http.shutdown()
        http.server_close()


def anthropic(url: str) -> Model:
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-test", base_url=url)


def openai(url: str) -> Model:
    return OpenAIModel("m", vendor=custom_server(url + "/v1"))


ADAPTERS = pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])


@ADAPTERS
def test_runs_on_one_loop_share_one_connection_until_the_agent_closes(
    server: Server, make: Callable[[str], Model]
) -> None:
    async def two_runs() -> tuple[str, str]:
        async with Agent(make(server.url), trace_dir=False) as agent:
            first = await agent.run("hello")
            second = await agent.run("hello again")
            assert server.closed == []  # the client is the model's, not the call's
        return first.status, second.status

    assert asyncio.run(two_runs()) == ("completed", "completed")
    assert len(server.ports) == 2
    assert len(set(server.ports)) == 1
    assert server.wait_closed(1), "leaving `async with` did not close the connection"


@ADAPTERS
def test_each_run_sync_gets_its_own_connection_and_closes_it(
    server: Server, make: Callable[[str], Model]
) -> None:
    agent = Agent(make(server.url), trace_dir=False)
    first = agent.run_sync("hello")
    second = agent.run_sync("hello again")  # a new loop: the first loop's sockets are dead

    assert (first.status, second.status) == ("completed", "completed"), (first.error, second.error)
    assert len(set(server.ports)) == 2
    assert server.wait_closed(2), "run_sync left a connection of its loop open"


@ADAPTERS
def test_a_closed_agent_opens_its_model_again_for_the_next_run(
    server: Server, make: Callable[[str], Model]
) -> None:
    async def run_close_run() -> str:
        agent = Agent(make(server.url), trace_dir=False)
        await agent.run("hello")
        await agent.aclose()
        result = await agent.run("hello again")
        await agent.aclose()
        return result.status

    assert asyncio.run(run_close_run()) == "completed"
    assert len(set(server.ports)) == 2
    assert server.wait_closed(2)


@pytest.mark.parametrize("method", ["run_sync", "run_stream"])
def test_run_sync_and_run_stream_take_the_same_arguments_as_run(method: str) -> None:
    run = inspect.signature(Agent.run).parameters
    other = inspect.signature(getattr(Agent, method)).parameters

    public = {name: p for name, p in run.items() if not name.startswith("_")}
    assert list(other) == list(public)
    for name, parameter in public.items():
        assert other[name].kind == parameter.kind
        assert other[name].default == parameter.default
        assert other[name].annotation == parameter.annotation


def test_run_sync_passes_its_arguments_through(server: Server) -> None:
    agent = Agent(anthropic(server.url), trace_dir=False)
    result = agent.run_sync("hello", session_id="session-a", run_id="run-a")

    assert (result.status, result.run_id) == ("completed", "run-a")


@ADAPTERS
def test_a_model_used_on_a_new_loop_without_closing_makes_a_new_client(
    server: Server, make: Callable[[str], Model]
) -> None:
    agent = Agent(make(server.url), trace_dir=False)
    first = asyncio.run(agent.run("hello"))  # asyncio.run knows nothing of the client
    second = asyncio.run(agent.run("hello again"))

    assert (first.status, second.status) == ("completed", "completed"), (first.error, second.error)
    assert len(set(server.ports)) == 2


class _Drip(BaseHTTPRequestHandler):
    """Starts an answer, then sends only keep-alives (an SSE comment, an Anthropic ping)
    every 0.2 s: each read succeeds, so the SDK's read timeout never fires."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        openai = "chat/completions" in self.path
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        first = _chunk({"role": "assistant", "content": "x"}, None) if openai else (
            b"event: message_start\ndata: " + json.dumps({"type": "message_start", "message": {
                "id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                "content": [], "stop_reason": None, "usage": {"input_tokens": 3,
                "output_tokens": 0}}}).encode() + b"\n\n"
        )  # fmt: skip
        alive = b": keep-alive\n\n" if openai else b'event: ping\ndata: {"type": "ping"}\n\n'
        try:
            self._send(first)
            for _ in range(300):  # a minute at most, should the client never leave
                time.sleep(0.2)
                self._send(alive)
        except OSError:  # the client gave up: what the test waits for
            return

    def _send(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        return None


class _Slow(_Drip):
    """A healthy long answer: a piece of it every 0.3 s, 2.4 s in all, then its end."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for n in range(8):
            time.sleep(0.3)
            self._send(_chunk({"role": "assistant", "content": f"{n} "}, None))
        self._send(_chunk({}, "stop") + b"data: [DONE]\n\n")
        self._send(b"")


def served(handler: type[BaseHTTPRequestHandler], adapter: type) -> tuple[Model, Any]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=http.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{http.server_address[1]}"
    if adapter is AnthropicModel:
        model: Model = AnthropicModel("claude-sonnet-4-6", api_key="sk-test", base_url=url,
                                      timeout_s=1.0)  # fmt: skip
    else:
        model = OpenAIModel("m", vendor=custom_server(url + "/v1"), timeout_s=1.0)
    return model, http


@pytest.mark.parametrize("adapter", [AnthropicModel, OpenAIModel], ids=["anthropic", "openai"])
def test_timeout_s_ends_a_stream_that_only_keeps_itself_alive(adapter: type) -> None:
    # each keep-alive was a read within the SDK's timeout: the run was held for ever
    model, http = served(_Drip, adapter)
    try:
        limits = Limits(wall_clock_s=None, model_retries=0)
        began = time.monotonic()
        result = Agent(model, trace_dir=False, limits=limits).run_sync("hi")
        took = time.monotonic() - began
    finally:
        http.shutdown()
        http.server_close()

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert "did not answer in time" in (result.error or "")
    assert took < 30  # the stream drips for a minute: ended by the request's own limit


def test_timeout_s_never_cuts_a_long_answer_that_keeps_coming() -> None:
    # the answer takes 2.4 s against timeout_s=1: no silence is longer than 0.3 s
    model, http = served(_Slow, OpenAIModel)
    try:
        result = Agent(model, trace_dir=False, limits=Limits(model_retries=0)).run_sync("hi")
    finally:
        http.shutdown()
        http.server_close()

    assert (result.status, result.output) == ("completed", "0 1 2 3 4 5 6 7 "), result.error


class _Flood(BaseHTTPRequestHandler):
    """An answer of 5 MiB of text (of arguments, for Anthropic's a tool call), gzipped
    as a hostile server sends it: 20 kB on the wire."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        piece = "a" * 65_536
        if "chat/completions" in self.path:
            body = b"".join(_chunk({"content": piece}, None) for _ in range(80))
        else:
            start = {"type": "message_start", "message": {
                "id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                "content": [], "stop_reason": None, "usage": {"input_tokens": 3,
                "output_tokens": 0}}}  # fmt: skip
            block = {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "t1", "name": "x", "input": {}}}  # fmt: skip
            delta = {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "input_json_delta", "partial_json": piece}}  # fmt: skip
            events = [("message_start", start), ("content_block_start", block)]
            events += [("content_block_delta", delta)] * 80
            body = b"".join(
                f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
            )
        packed = gzip.compress(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(packed)))
        self.end_headers()
        self.wfile.write(packed)

    def log_message(self, format: str, *args: object) -> None:
        return None


@ADAPTERS
def test_an_answer_past_four_mebibytes_is_refused_as_it_streams(
    make: Callable[[str], Model],
) -> None:
    # a small compressed response unpacked to gigabytes in memory, and its text went on
    # to the trace and the next request
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    thread = threading.Thread(target=http.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        model = make(f"http://127.0.0.1:{http.server_address[1]}")
        result = Agent(model, trace_dir=False, limits=Limits(model_retries=0)).run_sync("hi")
    finally:
        http.shutdown()
        http.server_close()

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert "answer passed 4,194,304 characters" in (result.error or "")
    assert not any(m.role == "assistant" for m in result.messages)
