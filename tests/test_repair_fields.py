"""`repair_fields` copies only what needs repair and keeps everything else as it was."""

from __future__ import annotations

from pi_runtime.messages import TextBlock, ToolCall, repair_fields
from pi_runtime.models import ModelResponse


def test_only_the_blocks_after_the_first_repair_are_looked_at_again() -> None:
    first, last = TextBlock(text="a"), TextBlock(text="c")
    response = ModelResponse(content=(first, TextBlock(text="b\ud800"), last))

    repaired = repair_fields(response)

    assert repaired.content == (first, TextBlock(text="b\ufffd"), last)
    assert repaired.content[0] is first and repaired.content[2] is last
    assert type(repaired.content) is tuple


def test_a_clean_answer_is_the_very_object() -> None:
    call = ToolCall(id="c1", name="noop", raw='{"i":1}', arguments={"i": 1})
    response = ModelResponse(content=(TextBlock(text="ok"), call), raw={"k": ["v"]})

    assert repair_fields(response) is response


def test_a_repair_in_the_last_block_keeps_the_ones_before() -> None:
    first = TextBlock(text="a")
    response = ModelResponse(content=(first, TextBlock(text="\udc00")))

    assert repair_fields(response).content == (first, TextBlock(text="\ufffd"))
