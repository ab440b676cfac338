"""Text no encoder can write never leaves a model adapter: lone surrogates become U+FFFD.

A provider's stream can carry `\\ud800` as a JSON escape, or split an emoji into its two
UTF-16 halves across consecutive chunks. Each adapter's output (live deltas and the final
response) must be text a trace, a terminal or a socket can take: the halves joined into
the one character, a half without its partner replaced by U+FFFD.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pi_runtime import Agent
from pi_runtime.messages import (
    TextBlock,
    ThinkingBlock,
    ToolCall,
    UserMessage,
    has_surrogates,
    message_to_dict,
)
from pi_runtime.models import (
    FunctionModel,
    Model,
    ModelRequest,
    ModelResponse,
    ReplayModel,
    ResponseDone,
    ScriptedModel,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from pi_runtime.models._repair import repair_response, repaired_stream
from pi_runtime.models.anthropic import AnthropicModel
from pi_runtime.models.local import LocalModel
from pi_runtime.models.local import engine as local_engine
from pi_runtime.models.local.engine import Decoded
from pi_runtime.models.openai import OpenAIModel
from pi_runtime.models.providers import custom_server
from pi_runtime.models.text_protocol import TextProtocolModel
from pi_runtime.observe import read_trace

HIGH, LOW = "\ud83d", "\ude00"  # the two halves of 😀
SMILE = "\U0001f600"
REQUEST = ModelRequest(system="", messages=(UserMessage(content="hi"),))


# --- a local server answering every POST with one recorded stream ----------------------


class _Stream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def serve() -> Iterator[Any]:
    """`serve(body)` starts a server on 127.0.0.1 answering with `body`; gives its URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(body: bytes) -> str:
        handler = type("Handler", (_Stream,), {"body": body})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # a short poll: shutdown() waits up to one poll (0.5 s by default)
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def sse(events: list[tuple[str | None, dict[str, Any]]], done: bool = False) -> bytes:
    """A stream whose JSON escapes every surrogate as `\\udXXX`, as providers send them."""
    lines = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines.append("data: " + json.dumps(data))  # ensure_ascii: surrogates as escapes
        lines.append("")
    if done:
        lines += ["data: [DONE]", ""]
    return ("\n".join(lines) + "\n").encode("ascii")


async def collect(model: Model, request: ModelRequest = REQUEST) -> list[StreamEvent]:
    events = [event async for event in model.stream(request)]
    await model.aclose()
    return events


def joined(events: list[StreamEvent], kind: type[TextDelta | ThinkingDelta]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def arguments_streamed(events: list[StreamEvent]) -> str:
    return "".join(e.arguments_delta for e in events if isinstance(e, ToolCallDelta))


def final(events: list[StreamEvent]) -> ModelResponse:
    assert isinstance(events[-1], ResponseDone)
    return events[-1].response


def no_surrogates_anywhere(events: list[StreamEvent]) -> None:
    for event in events:
        if isinstance(event, ResponseDone):
            data = [message_to_dict(event.response.to_message()), event.response.raw]
            assert not has_surrogates(json.dumps(data, ensure_ascii=False)), event
        else:
            for field in ("text", "id", "name", "arguments_delta"):
                value = getattr(event, field, None)
                assert not (isinstance(value, str) and has_surrogates(value)), event


# --- OpenAI-compatible servers ---------------------------------------------------------


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_call(arguments: str, **head: str) -> dict[str, Any]:
    function = {"arguments": arguments}
    if "name" in head:
        function["name"] = head["name"]
    piece: dict[str, Any] = {"index": 0, "function": function}
    if "id" in head:
        piece.update(id=head["id"], type="function")
    return {"tool_calls": [piece]}


def test_openai_stream_joins_an_emoji_split_across_chunks_and_repairs_lone_halves(
    serve: Any,
) -> None:
    body = sse(
        [
            (None, openai_chunk({"role": "assistant", "reasoning_content": "think " + HIGH})),
            (None, openai_chunk({"reasoning_content": LOW})),
            (None, openai_chunk({"content": "smile " + HIGH})),
            (None, openai_chunk({"content": LOW + " and \ud800 alone"})),
            (None, openai_chunk(openai_call('{"text": "' + HIGH, id="call_1", name="echo\udfff"))),
            (None, openai_chunk(openai_call(LOW + '"}'))),
            (None, openai_chunk({}, finish="tool_calls")),
        ],
        done=True,
    )
    model = OpenAIModel("m", vendor=custom_server(serve(body) + "/v1"))

    events = asyncio.run(collect(model))

    no_surrogates_anywhere(events)
    assert joined(events, TextDelta) == f"smile {SMILE} and \ufffd alone"
    assert joined(events, ThinkingDelta) == f"think {SMILE}"
    assert arguments_streamed(events) == f'{{"text": "{SMILE}"}}'
    response = final(events)
    assert response.content == (
        ThinkingBlock(text=f"think {SMILE}"),
        TextBlock(text=f"smile {SMILE} and \ufffd alone", phase="commentary"),
        ToolCall(
            id="call_1",
            name="echo\ufffd",
            raw=f'{{"text": "{SMILE}"}}',
            arguments={"text": SMILE},
        ),
    )


def test_a_run_on_an_openai_server_answering_a_lone_surrogate_completes(
    serve: Any, tmp_path: Path
) -> None:
    body = sse(
        [
            (None, openai_chunk({"role": "assistant", "content": "odd \ud800 reply " + HIGH})),
            (None, openai_chunk({}, finish="stop")),
        ],
        done=True,
    )
    model = OpenAIModel("m", vendor=custom_server(serve(body) + "/v1"))

    result = Agent(model, trace_dir=tmp_path).run_sync("hi")

    assert (result.status, result.stop_reason) == ("completed", "final_answer"), result.error
    assert result.output == "odd \ufffd reply \ufffd"
    assert result.trace is not None
    answers = [e for e in read_trace(result.trace) if e["kind"] == "model_response"]
    assert answers[0]["message"]["content"][0]["text"] == "odd \ufffd reply \ufffd"


# --- Anthropic -------------------------------------------------------------------------


def anthropic_stream(*, stop: str = "tool_use") -> bytes:
    def delta(index: int, **fields: str) -> tuple[str, dict[str, Any]]:
        kind = next(iter(fields))
        payload = {"type": f"{kind}_delta" if kind != "partial_json" else "input_json_delta"}
        payload.update(fields)
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": index,
            "delta": payload,
        }

    def start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_start", {
            "type": "content_block_start",
            "index": index,
            "content_block": block,
        }

    def stop_block(index: int) -> tuple[str, dict[str, Any]]:
        return "content_block_stop", {"type": "content_block_stop", "index": index}

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return sse(
        [
            ("message_start", {"type": "message_start", "message": message}),
            start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, thinking="think " + HIGH),
            delta(0, thinking=LOW),
            delta(0, signature="sig"),
            stop_block(0),
            start(1, {"type": "text", "text": ""}),
            delta(1, text="smile " + HIGH),
            delta(1, text=LOW + " and \ud800 alone"),
            stop_block(1),
            start(2, {"type": "tool_use", "id": "toolu_1", "name": "echo\udfff", "input": {}}),
            delta(2, partial_json='{"text": "' + HIGH),
            delta(2, partial_json=LOW + '"}'),
            stop_block(2),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def test_anthropic_stream_joins_an_emoji_split_across_events_and_repairs_lone_halves(
    serve: Any,
) -> None:
    model = AnthropicModel(
        "claude-sonnet-4-6", api_key="sk-test", base_url=serve(anthropic_stream())
    )

    events = asyncio.run(collect(model))

    no_surrogates_anywhere(events)
    assert joined(events, TextDelta) == f"smile {SMILE} and \ufffd alone"
    assert joined(events, ThinkingDelta) == f"think {SMILE}"
    assert arguments_streamed(events) == f'{{"text": "{SMILE}"}}'
    response = final(events)
    assert response.content == (
        ThinkingBlock(text=f"think {SMILE}", signature="sig"),
        TextBlock(text=f"smile {SMILE} and \ufffd alone", phase="commentary"),
        ToolCall(
            id="toolu_1",
            name="echo\ufffd",
            raw=f'{{"text": "{SMILE}"}}',
            arguments={"text": SMILE},
        ),
    )


# --- the embedded model ----------------------------------------------------------------


class _FakeEngine:
    """Stands for llama.cpp: writes the reply's text in the pieces given."""

    label = "local:fake"
    chat_template = None  # a model without one: its replies are the transcript's JSON

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def decode(self, prompt: str, grammar: str, *, on_text: Any, **_: Any) -> Decoded:
        for piece in self.pieces:
            on_text(piece)
        return Decoded(prompt_tokens=3, cached_tokens=0, output_tokens=5, cut=False)


def test_the_local_model_joins_escaped_halves_written_in_two_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The model writes JSON: its answer may spell a character as two escapes, or one alone.
    engine = _FakeEngine('{"answer": "hi \\ud83d', '\\ude00 \\ud800"}')
    monkeypatch.setattr(local_engine, "reply_grammar", lambda tools, choice: "")
    monkeypatch.setattr(LocalModel, "_engine", lambda self: engine)

    events = asyncio.run(collect(LocalModel()))

    no_surrogates_anywhere(events)
    assert joined(events, TextDelta) == f"hi {SMILE} \ufffd"
    assert final(events).content == (TextBlock(text=f"hi {SMILE} \ufffd"),)


# --- the canned models -----------------------------------------------------------------


def test_a_scripted_reply_with_a_lone_surrogate_ends_the_run_well(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "hello \ud800 " + HIGH + LOW}]}))

    result = Agent(ScriptedModel.from_file(script), trace_dir=tmp_path).run_sync("hi")

    assert (result.status, result.stop_reason) == ("completed", "final_answer"), result.error
    assert result.output == f"hello \ufffd {SMILE}"


def test_a_function_model_response_is_repaired_in_every_field() -> None:
    def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            content=(
                ThinkingBlock(text="t\udc00", signature="s\ud800"),
                TextBlock(text="x" + HIGH, phase="commentary"),
                ToolCall(
                    id="c\ud800",
                    name="n\udfff",
                    raw='{"k\ud800": "' + HIGH + LOW + '"}',
                    arguments={"k\ud800": [HIGH + LOW, {"deep": "\udc00"}]},
                ),
            ),
            model="m\ud800",
            raw={"text\ud800": ["x" + HIGH]},
        )

    events = asyncio.run(collect(FunctionModel(answer)))

    no_surrogates_anywhere(events)
    response = final(events)
    assert response.content == (
        ThinkingBlock(text="t\ufffd", signature="s\ufffd"),
        TextBlock(text="x\ufffd", phase="commentary"),
        ToolCall(
            id="c\ufffd",
            name="n\ufffd",
            raw=f'{{"k\ufffd": "{SMILE}"}}',
            arguments={"k\ufffd": [SMILE, {"deep": "\ufffd"}]},
        ),
    )
    assert (response.model, response.raw) == ("m\ufffd", {"text\ufffd": ["x\ufffd"]})


def test_a_function_model_dict_answer_is_repaired_in_complete_too() -> None:
    model = FunctionModel(lambda request: {"text": "a\ud800", "thinking": HIGH + LOW})

    response = asyncio.run(model.complete(REQUEST))

    assert response.content == (ThinkingBlock(text=SMILE), TextBlock(text="a\ufffd"))


def test_a_replayed_trace_holding_surrogate_escapes_answers_repaired_text(tmp_path: Path) -> None:
    trace = tmp_path / "hand-written.jsonl"
    message = {"role": "assistant", "content": [{"kind": "text", "text": "a\ud800" + HIGH + LOW}]}
    trace.write_text(json.dumps({"kind": "model_response", "turn": 0, "message": message}) + "\n")

    response = asyncio.run(ReplayModel(trace).complete(REQUEST))

    assert response.content == (TextBlock(text=f"a\ufffd{SMILE}"),)


class _RawTextModel:
    """A bare adapter streaming text in the pieces given, repairing nothing itself."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces
        self.name = "raw"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for piece in self.pieces:
            yield TextDelta(text=piece)
        yield ResponseDone(response=await self.complete(request))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=(TextBlock(text="".join(self.pieces)),))

    async def aclose(self) -> None:
        return None


def test_text_protocol_actions_with_surrogate_escapes_are_repaired() -> None:
    action = '<action>{"tool": "echo", "arguments": {"text": "\\ud800 x"}}</action>'
    model = TextProtocolModel(_RawTextModel("say " + HIGH, LOW + " ", action))

    events = asyncio.run(collect(model))
    completed = asyncio.run(model.complete(REQUEST))

    no_surrogates_anywhere(events)
    assert joined(events, TextDelta).startswith(f"say {SMILE}")
    for response in (final(events), completed):
        (call,) = response.tool_calls
        assert call.name == "echo"
        assert not has_surrogates(json.dumps(call.arguments, ensure_ascii=False))


# --- the shared repair of live deltas --------------------------------------------------


async def _events(*events: StreamEvent) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


async def _repaired(*events: StreamEvent) -> list[StreamEvent]:
    return [event async for event in repaired_stream(_events(*events))]


def test_a_high_half_waits_for_the_next_delta_of_its_own_channel() -> None:
    done = ResponseDone(response=ModelResponse(content=()))

    events = asyncio.run(
        _repaired(
            TextDelta(text="a" + HIGH),
            ThinkingDelta(text="b"),  # another channel does not complete the text's pair
            ToolCallDelta(index=0, id="c", name="f", arguments_delta='"' + HIGH),
            ToolCallDelta(index=1, id="d", name="g", arguments_delta=LOW),  # another call
            TextDelta(text=LOW + "z"),
            ToolCallDelta(index=0, arguments_delta=LOW + '"'),
            TextDelta(text=HIGH),  # the answer ends before its partner
            done,
        )
    )

    assert events == [
        TextDelta(text="a"),
        ThinkingDelta(text="b"),
        ToolCallDelta(index=0, id="c", name="f", arguments_delta='"'),
        ToolCallDelta(index=1, id="d", name="g", arguments_delta="\ufffd"),
        TextDelta(text=SMILE + "z"),
        ToolCallDelta(index=0, arguments_delta=SMILE + '"'),
        TextDelta(text="\ufffd"),
        done,
    ]


def test_an_adapter_stream_is_closed_when_its_consumer_stops_at_the_response() -> None:
    closed: list[bool] = []

    async def adapter() -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta(text="x")
            yield ResponseDone(response=ModelResponse(content=(TextBlock(text="x"),)))
            yield TextDelta(text="never read")
        finally:
            closed.append(True)

    async def consume() -> list[bool]:
        stream = repaired_stream(adapter())
        async for event in stream:
            if isinstance(event, ResponseDone):
                break
        await stream.aclose()
        return list(closed)  # before the event loop's shutdown finalizes what was left open

    assert asyncio.run(consume()) == [True]


def test_a_clean_response_is_passed_on_as_the_very_same_object() -> None:
    response = ModelResponse(
        content=(
            TextBlock(text=f"fine {SMILE}"),
            ToolCall(id="c", name="f", raw="{}", arguments={}),
        ),
        raw={"choices": [{"text": "fine"}]},
    )

    assert repair_response(response) is response
