"""An OpenAI-compatible server answering in the wrong shape ends the run with one clear
`model_error`, not retried, naming the server and the field: `choices` that is no list, a
tool call named 42, a delta that is a string. Shapes with a plain, safe reading (null
`choices` or `delta`, content as a list of parts, arguments as one JSON object) are read,
as pydantic-ai reads them, and the run completes. Served on 127.0.0.1 (`provider_support`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pi_runtime.models.openai import OpenAIModel
from pi_runtime.models.providers import custom_server
from provider_support import *  # noqa: F403  (the serve fixture)
from provider_support import Serve, Served, failed_once_with, run, sse


def chunk(delta: object = None, finish: str | None = None, **fields: object) -> dict[str, Any]:
    choice = {"index": 0, "delta": {} if delta is None else delta, "finish_reason": finish}
    head = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    return {**head, "choices": [choice], **fields}


def call(**function: object) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": function}]}


def openai_stream(*chunks: object) -> bytes:
    return sse([(None, c) for c in chunks], done=True)


def openai_model(served: Served) -> OpenAIModel:
    return OpenAIModel("m", vendor=custom_server(served.url + "/v1"))


ENDS = chunk(finish="stop")
CALLED = chunk(finish="tool_calls")

OPENAI_SHAPES = {
    "choices an object": (
        [chunk(choices={"index": 0, "delta": {"content": "hi"}}), ENDS],
        'the chunk\'s choices is an object ({"index": 0, "delta": {"content": "hi"}}), not a list',
    ),
    "a choice null": ([chunk(choices=[None]), ENDS], "choice 0 is null, not an object"),
    "a delta a string": (
        [chunk("hello"), ENDS],
        'choice 0\'s delta is a string ("hello"), not an object',
    ),
    "content a number": (
        [chunk({"content": 42}), ENDS],
        "choice 0's content is a number (42), not a string",
    ),
    "arguments a number": (
        [chunk(call(name="echo", arguments=7)), CALLED],
        "tool call 0's arguments are a number (7), not a JSON string",
    ),
    "arguments an object, then text": (
        [
            chunk(call(name="echo", arguments={"text": "a"})),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
            CALLED,
        ],
        "tool call 0's arguments come both as an object and as text",
    ),
    "a name a number": (
        [chunk(call(name=42, arguments="{}")), CALLED],
        "tool call 0's name is a number (42), not a string",
    ),
    "a name null": (
        [chunk(call(name=None, arguments='{"text": "a"}')), CALLED],
        "tool call 0 has no name",
    ),
    "tool_calls a string": (
        [chunk({"tool_calls": "echo"}), CALLED],
        'the delta\'s tool_calls is a string ("echo"), not a list',
    ),
    "a function a string": (
        [chunk({"tool_calls": [{"index": 0, "id": "c", "function": "echo"}]}), CALLED],
        'tool call 0\'s function is a string ("echo"), not an object',
    ),
    "a chunk a list": ([[1, 2], ENDS], "a chunk of the stream is a list ([1, 2]), not an object"),
}


@pytest.mark.parametrize(("chunks", "said"), OPENAI_SHAPES.values(), ids=OPENAI_SHAPES)
def test_an_openai_answer_of_the_wrong_shape_ends_the_run_naming_the_field(
    serve: Serve, chunks: list[object], said: str
) -> None:
    served = serve(openai_stream(*chunks))

    result = run(openai_model(served))

    failed_once_with(result, f"the server at {served.url}/v1 sent a malformed answer: {said}")


def test_a_chunk_that_is_no_json_says_so(serve: Serve) -> None:
    served = serve(openai_stream("{oops", ENDS))

    result = run(openai_model(served))

    said = "an event of its stream is not JSON (Expecting property name enclosed in double quotes)"
    failed_once_with(result, f"the server at {served.url}/v1 sent a malformed answer: {said}")


def test_choices_or_a_delta_that_is_null_carry_nothing_and_the_answer_stands(
    serve: Serve,
) -> None:
    # pydantic-ai reads them so too: null choices from some servers, a null delta from
    # Azure's content filter
    served = serve(
        openai_stream(
            chunk(choices=None),
            chunk({"role": "assistant", "content": "Hel"}),
            chunk(choices=[{"index": 0, "delta": None, "finish_reason": None}]),
            chunk({"content": "lo"}, finish="stop"),
        )
    )

    result = run(openai_model(served))

    assert (result.status, result.output) == ("completed", "Hello"), result.error


def test_content_given_as_a_list_of_parts_reads_as_the_text_of_its_text_parts(
    serve: Serve,
) -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "reference", "id": 3}, "lo"]
    served = serve(openai_stream(chunk({"content": parts}, finish="stop")))

    result = run(openai_model(served))

    assert (result.status, result.output) == ("completed", "Hello"), result.error


def test_arguments_given_as_one_object_are_read_as_its_json_and_the_tool_runs(
    serve: Serve,
) -> None:
    served = serve(
        openai_stream(chunk(call(name="echo", arguments={"text": "北京"})), CALLED),
        openai_stream(chunk({"content": "done"}, finish="stop")),
    )

    result = run(openai_model(served))

    assert (result.status, result.output) == ("completed", "done"), result.error
    assistant, tool_result = served.requests[1]["messages"][-2:]
    sent = assistant["tool_calls"][0]["function"]["arguments"]
    assert isinstance(sent, str) and json.loads(sent) == {"text": "北京"}
    assert tool_result["content"] == "echo: 北京"


@pytest.mark.parametrize(
    "usage", [{"prompt_tokens": "lots", "completion_tokens": [1]}, "lots"], ids=["fields", "all"]
)
def test_openai_usage_of_the_wrong_shape_counts_as_unreported(serve: Serve, usage: object) -> None:
    served = serve(openai_stream(chunk({"content": "hi"}), chunk(finish="stop", usage=usage)))

    result = run(openai_model(served))

    assert (result.status, result.output) == ("completed", "hi"), result.error
    assert result.usage_source == "counted" and result.usage.output_tokens > 0


def test_a_quoted_value_is_one_short_line_without_the_key(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-proj-" + "k" * 40
    monkeypatch.setenv("OPENAI_API_KEY", key)
    content = {"echo": f"{key}\nline two", "then": "x" * 5000}
    served = serve(openai_stream(chunk({"content": content}), ENDS))

    result = run(openai_model(served))

    assert result.stop_reason == "model_error" and result.error is not None
    assert key not in result.error and "[redacted]" in result.error
    provider = f"the server at {served.url}/v1"
    quoted = result.error.removeprefix(f"{provider} sent a malformed answer: ")
    assert quoted.startswith("choice 0's content is an object ({")
    assert quoted.endswith("…), not a string") and len(quoted) < 120
    assert "\n" not in quoted and "\\n" in quoted  # the newline shown escaped
