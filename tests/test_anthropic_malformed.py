"""An Anthropic stream in the wrong shape ends the run with one clear `model_error`, not
retried, naming the field: a content block that is null or has no type, a tool named 42, a
delta that is a string or comes for no block. Blocks of a type Pi does not know, a null
text and a tool `input` given as JSON text are read, and the run completes. Served on
127.0.0.1 (`provider_support`).
"""

from __future__ import annotations

import pytest

from pi_runtime.models.anthropic import AnthropicModel
from provider_support import *  # noqa: F403  (the serve fixture)
from provider_support import Serve, Served, failed_once_with, run, sse

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [],
    "stop_reason": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}


def event(name: str, **fields: object) -> tuple[str, object]:
    return name, {"type": name, **fields}


def start(index: object, block: object) -> tuple[str, object]:
    return event("content_block_start", index=index, content_block=block)


def delta(index: int, payload: object) -> tuple[str, object]:
    return event("content_block_delta", index=index, delta=payload)


def text_delta(index: int, text: object) -> tuple[str, object]:
    return delta(index, {"type": "text_delta", "text": text})


def anthropic_stream(
    *events: tuple[str, object], stop: str = "end_turn", usage: object = None
) -> bytes:
    return sse(
        [
            event("message_start", message=MESSAGE),
            *events,
            event(
                "message_delta",
                delta={"stop_reason": stop},
                usage={"output_tokens": 3} if usage is None else usage,
            ),
            event("message_stop"),
        ]
    )


def claude(served: Served) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-test", base_url=served.url)


TEXT = {"type": "text", "text": ""}
TOOL = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}

ANTHROPIC_SHAPES = {
    "a block null": ([start(0, None)], "content block 0 is null, not an object"),
    "a block with no type": (
        [start(0, {"text": "hi"})],
        "the type of content block 0 is null, not a string",
    ),
    "a tool name a number": (
        [start(0, {**TOOL, "name": 42})],
        "the name of content block 0 (tool_use) is a number (42), not a string",
    ),
    "a tool with no id": (
        [start(0, {"type": "tool_use", "name": "echo", "input": {}})],
        "content block 0 (tool_use) has no id",
    ),
    "a tool input a number": (
        [start(0, {**TOOL, "input": 5})],
        "the input of content block 0 (tool_use) is a number (5), not an object",
    ),
    "a delta a string": (
        [start(0, TEXT), delta(0, "hello")],
        'the delta of content block 0 is a string ("hello"), not an object',
    ),
    "a text a list": (
        [start(0, TEXT), text_delta(0, ["a"])],
        'the text of a text_delta (block 0) is a list (["a"]), not a string',
    ),
    "a delta before its block": (
        [text_delta(3, "x")],
        "content block 3 has a delta but no start",
    ),
    "arguments for a text block": (
        [start(0, TEXT), delta(0, {"type": "input_json_delta", "partial_json": "{}"})],
        "an input_json_delta came for content block 0 (text), not a tool_use",
    ),
    "an index a string": (
        [start("zero", TEXT)],
        'content_block_start\'s index is a string ("zero"), not a number',
    ),
    "a message_delta a string": (
        [event("message_delta", delta="end")],
        'message_delta\'s delta is a string ("end"), not an object',
    ),
}


@pytest.mark.parametrize(("events", "said"), ANTHROPIC_SHAPES.values(), ids=ANTHROPIC_SHAPES)
def test_an_anthropic_answer_of_the_wrong_shape_ends_the_run_naming_the_field(
    serve: Serve, events: list[tuple[str, object]], said: str
) -> None:
    served = serve(anthropic_stream(*events))

    result = run(claude(served))

    failed_once_with(result, f"anthropic sent a malformed answer: {said}")


def test_an_anthropic_message_start_without_a_message_names_it(
    serve: Serve,
) -> None:
    served = serve(sse([event("message_start", message=None), event("message_stop")]))

    result = run(claude(served))

    failed_once_with(
        result, "anthropic sent a malformed answer: message_start's message is null, not an object"
    )


def test_an_event_that_is_no_json_says_so(serve: Serve) -> None:
    served = serve(sse([("message_start", "{oops")]))

    result = run(claude(served))

    said = "an event of its stream is not JSON (Expecting property name enclosed in double quotes)"
    failed_once_with(result, f"anthropic sent a malformed answer: {said}")


def test_a_block_of_a_type_pi_does_not_know_stays_out_of_the_answer(
    serve: Serve,
) -> None:
    served = serve(
        anthropic_stream(
            start(0, {"type": "mystery", "foo": 1}), start(1, TEXT), text_delta(1, "hi")
        )
    )

    result = run(claude(served))

    assert (result.status, result.output) == ("completed", "hi"), result.error


def test_a_null_text_in_a_delta_is_no_text(serve: Serve) -> None:
    served = serve(anthropic_stream(start(0, TEXT), text_delta(0, None), text_delta(0, "hi")))

    result = run(claude(served))

    assert (result.status, result.output) == ("completed", "hi"), result.error


def test_a_tool_input_given_as_a_json_string_is_read_as_the_arguments(
    serve: Serve,
) -> None:
    served = serve(
        anthropic_stream(start(0, {**TOOL, "input": '{"text": "北京"}'}), stop="tool_use"),
        anthropic_stream(start(0, {"type": "text", "text": "done"})),
    )

    result = run(claude(served))

    assert (result.status, result.output) == ("completed", "done"), result.error
    tool_result = served.requests[1]["messages"][-1]["content"][0]
    assert tool_result["content"] == "echo: 北京"


@pytest.mark.parametrize("usage", [{"output_tokens": "many"}, "many"], ids=["fields", "all"])
def test_anthropic_usage_of_the_wrong_shape_counts_as_unreported(
    serve: Serve, usage: object
) -> None:
    served = serve(anthropic_stream(start(0, TEXT), text_delta(0, "hi"), usage=usage))

    result = run(claude(served))

    assert (result.status, result.output) == ("completed", "hi"), result.error
    assert result.usage.output_tokens > 0


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": "x" * 3_000_000},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "x" * 3_000_000}},
    ],
    ids=["text", "input"],
)
def test_what_a_block_brings_at_its_start_counts_toward_the_answers_cap(
    serve: Serve, block: dict[str, object]
) -> None:
    # two such blocks pass the 4 MiB cap: before, text sent at a block's start, and a
    # tool's whole input, were never counted, so any number of blocks could come
    served = serve(anthropic_stream(start(0, block), start(1, block)))

    result = run(claude(served))

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert "answer passed 4,194,304 characters" in (result.error or "")
