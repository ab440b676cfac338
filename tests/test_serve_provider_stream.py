"""What a provider streams reaches an AG-UI client whole: a real `pi serve` (uvicorn on
127.0.0.1) in front of an OpenAI-compatible server on 127.0.0.1 (`provider_support`)
that gives two calls one id, an id with a newline, `call_0` on every answer, and text
holding the line separators U+2028, U+2029 and U+0085."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from pi_runtime.server import ServeConfig, create_app, served_agents
from provider_support import *  # noqa: F403  (the serve fixture)
from provider_support import Serve, sse
from serve_support import TOOLS, ThreadServer, run_sse, well_formed

AGENT = """
model = "m"
base_url = "{url}/v1"
tools = ["{module}:TOOLS"]
instructions = "You answer questions about orders."
[limits]
max_steps = 6
"""
USAGE = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def calls(*ids: str) -> bytes:
    """An answer calling `lookup` once per id, each call's arguments in two pieces."""
    chunks = [chunk({"role": "assistant"})]
    for index, call_id in enumerate(ids):
        first = {"id": call_id, "type": "function", "function": {"name": "lookup"}}
        first["function"]["arguments"] = '{"order_id": '
        rest = {"function": {"arguments": f'"O-{index}"}}'}}
        chunks += [
            chunk({"tool_calls": [{"index": index, **first}]}),
            chunk({"tool_calls": [{"index": index, **rest}]}),
        ]
    chunks.append({**chunk({}, "tool_calls"), "usage": USAGE})
    return sse([(None, c) for c in chunks], done=True)


def says(text: str) -> bytes:
    chunks = [chunk({"role": "assistant", "content": text}), {**chunk({}, "stop"), "usage": USAGE}]
    return sse([(None, c) for c in chunks], done=True)


@pytest.fixture
def pi_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`pi_serve(provider_url)`: a server running an agent of that provider's model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")
    module = f"providertools_{uuid.uuid4().hex[:12]}"  # a process imports each once
    (tmp_path / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    stack = ExitStack()

    def start(url: str) -> ThreadServer:
        agent = tmp_path / "agent.toml"
        agent.write_text(AGENT.format(url=url, module=module), encoding="utf-8")
        config = ServeConfig(
            agents=served_agents([str(agent)]),
            db_url=f"sqlite:///{tmp_path / 'pi.db'}",
            trace_dir=tmp_path / "traces",
        )
        return stack.enter_context(ThreadServer(create_app(config)))

    with stack:
        yield start


def test_streamed_calls_carry_the_ids_the_run_keeps_each_started_once_with_its_result(
    serve: Serve, pi_serve: Any
) -> None:
    # two calls given one id and one id with a newline in an answer, then `call_0` on
    # every answer of this turn and the next: the run keeps none of those but the first
    provider = serve(
        calls("call_0", "call_0", "bad\nid"),
        calls("call_0"),
        says("Done."),
        calls("call_0"),
        says("Done again."),
    )
    server = pi_serve(provider.url)
    streams = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for turn in ("first", "second"):
            streams.append(run_sse(client, "/v1/sessions/ids/runs", {"message": turn}))
        stored = client.get("/v1/sessions/ids").json()["messages"]

    kept = [c for m in stored if m["role"] == "assistant" for c in m["content"]]
    kept = [c for c in kept if c["kind"] == "tool_call"]
    assert len(kept) == 5 and len({c["id"] for c in kept}) == 5
    events = [e for stream in streams for e in stream]
    for stream in streams:
        well_formed(stream)  # every TOOL_CALL_START has its TOOL_CALL_END
    started = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    results = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert Counter(started) == Counter(results) == Counter(c["id"] for c in kept)
    arguments: dict[str, str] = {}
    for e in events:
        if e["type"] == "TOOL_CALL_ARGS":
            arguments[e["toolCallId"]] = arguments.get(e["toolCallId"], "") + e["delta"]
    assert {i: json.loads(a) for i, a in arguments.items()} == {
        c["id"]: c["arguments"] for c in kept
    }
    answers = {c["id"]: c["arguments"]["order_id"] for c in kept}
    for e in events:
        if e["type"] == "TOOL_CALL_RESULT":  # each result under its own call's id
            assert json.loads(e["content"])["order_id"] == answers[e["toolCallId"]]


def test_line_separators_in_model_text_stay_inside_their_sse_data_lines(
    serve: Serve, pi_serve: Any
) -> None:
    text = "one\u2028two\u2029three\x85four"
    server = pi_serve(serve(says(text)).url)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        # `run_sse` reads with httpx's `iter_lines`, which splits as `str.splitlines` does
        events = run_sse(client, "/v1/sessions/lines/runs", {"message": "hi"})

    well_formed(events)
    content = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(content) == text
    assert events[-1]["result"]["output"] == text
