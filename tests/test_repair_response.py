"""`repair_response` skips the field-by-field walk only for an answer it can see is clean,
and repairs every other one as `repair_fields` does."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_runtime.messages import (
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    repair_fields,
)
from pi_runtime.models import ModelResponse, repair_response

LONE = "\ud800"
TEXT = st.lists(st.sampled_from(["a", "é", " ", '"', LONE, "\udc00", "\ud83d\ude00", "\x00"])).map(
    "".join
)
JSONISH = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def response(text: str, raw: Any = None, arguments: Any = None) -> ModelResponse:
    return ModelResponse(
        content=(
            ThinkingBlock(text=text, signature=text or None),
            TextBlock(text=text, phase="commentary"),
            ToolCall(id=text, name=text, raw=text, arguments=arguments),
        ),
        finish_reason="tool_calls",
        usage=Usage(input_tokens=1, output_tokens=2),
        model=text or None,
        raw=raw,
    )


def answer_of(texts: list[str], raw: Any, arguments: dict[str, Any]) -> ModelResponse:
    """An answer with each string field holding a text of its own."""
    return ModelResponse(
        content=(
            ThinkingBlock(text=texts[0], signature=texts[1] or None),
            TextBlock(text=texts[2], phase="commentary"),
            ToolCall(id=texts[3], name=texts[4], raw=texts[5], arguments=arguments),
        ),
        finish_reason=texts[6],  # type: ignore[arg-type]
        usage=Usage(input_tokens=1, output_tokens=2),
        model=texts[7] or None,
        raw=[raw, texts[8]],
    )


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(TEXT, min_size=9, max_size=9),
    raw=JSONISH,
    arguments=st.dictionaries(TEXT, JSONISH, max_size=3),
)
def test_a_response_is_repaired_as_the_field_walk_repairs_it(
    texts: list[str], raw: Any, arguments: dict[str, Any]
) -> None:
    answer = answer_of(texts, raw, arguments)

    repaired = repair_response(answer)

    assert repaired == repair_fields(answer)
    if repair_fields(answer) is answer:
        assert repaired is answer  # nothing to repair: the very object


@pytest.mark.parametrize("slot", range(9))
def test_a_lone_surrogate_in_any_one_string_field_is_repaired(slot: int) -> None:
    texts = ["ok"] * 9
    texts[slot] = f"a{LONE}b"
    answer = answer_of(texts, None, {"k": "v"})

    repaired = repair_response(answer)

    assert repaired == repair_fields(answer) and repaired != answer
    assert LONE not in repr(repaired)


@pytest.mark.parametrize(
    "raw",
    [
        (LONE,),  # a tuple: the walk goes into it
        [LONE],
        {"k": {LONE: 1}},
        TextBlock(text=LONE),  # a dataclass: the walk goes into it too
    ],
)
def test_a_surrogate_in_a_raw_payload_of_any_shape_is_repaired(raw: Any) -> None:
    repaired = repair_response(response("ok", raw=raw))

    assert repaired.raw == repair_fields(response("ok", raw=raw)).raw
    assert LONE not in repr(repaired.raw)


def test_a_clean_answer_is_returned_as_it_is() -> None:
    answer = response("plain text", raw={"id": "x", "choices": [1, 2]}, arguments={"i": 1})

    assert repair_response(answer) is answer


def test_the_quick_look_knows_every_field_the_walk_repairs() -> None:
    # a field added to one of these must be added to `_surely_clean` too: it names them all
    assert [f.name for f in fields(ModelResponse)] == [
        "content",
        "finish_reason",
        "usage",
        "model",
        "raw",
    ]
    assert [f.name for f in fields(ToolCall)] == [
        "id",
        "name",
        "raw",
        "arguments",
        "truncated",
        "kind",
    ]
    assert [f.name for f in fields(TextBlock)] == ["text", "phase", "kind"]
    assert [f.name for f in fields(ThinkingBlock)] == ["text", "signature", "kind"]
    assert [f.name for f in fields(Usage)] == [
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "cost_usd",
    ]
