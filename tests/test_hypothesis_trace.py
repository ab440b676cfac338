"""Property tests: whatever text a run meets, its trace reads back as the run saw it.

Text comes from anywhere (a model, a tool, a user) and may hold lone surrogates, line
separators, NUL. Written through the `Recorder`, every event must read back from
`read_trace`, and every model response from `replay:`, with that text unchanged except
for the one repair: a lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pi_runtime.messages import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolErrorInfo,
    ToolResultMessage,
    UserMessage,
    message_to_dict,
    repair_text,
)
from pi_runtime.models import ModelRequest, ReplayModel
from pi_runtime.observe import GuardTriggered, MessageAppended, ModelResponded, read_trace
from pi_runtime.observe.trace import Recorder

# st.characters() leaves out surrogates unless asked; the separators are rare by chance.
HOSTILE = "\ud800\udbff\udc00\udfff\ud83d\ude00\n\r\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
TEXT = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(HOSTILE)))
PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def answer(text: str) -> AssistantMessage:
    """An assistant message holding `text` in every place a string can be."""
    return AssistantMessage(
        content=(
            ThinkingBlock(text=text, signature=text),
            TextBlock(text=text, phase="commentary"),
            ToolCall(id=text, name=text, raw=text, arguments={text: [text, {"k": text}]}),
        ),
        model=text,
    )


def record(directory: Path, texts: list[str]) -> Path:
    recorder = Recorder(directory, "run")
    try:
        for turn, text in enumerate(texts):
            recorder.emit(MessageAppended(index=turn, message=UserMessage(content=text)))
            recorder.emit(
                ModelResponded(
                    turn=turn, step=turn, message=answer(text), raw={text: text}, latency_ms=0.0
                )
            )
            error = ToolErrorInfo(kind="transient", message=text, hint=text)
            result = ToolResultMessage(tool_call_id=text, name=text, content=text, error=error)
            recorder.emit(MessageAppended(index=turn, message=result))
            recorder.emit(GuardTriggered(guard=text, detail=text))
    finally:
        recorder.close()
    assert recorder.path is not None
    return Path(recorder.path)


@PROPERTY_SETTINGS
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
@example(texts=["\ud83d", "\ude00"])  # halves of one emoji in two events stay apart
@example(texts=["\ud83d\ude00 \u2028\u2029\x85\x00"])
def test_every_event_reads_back_with_its_text_repaired(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        trace = record(Path(directory), texts)

        events = read_trace(trace)
        lines = trace.read_text(encoding="utf-8").splitlines()

    assert len(lines) == len(events) == 4 * len(texts)
    for turn, text in enumerate(texts):
        fixed = repair_text(text)
        user, response, result, guard = events[4 * turn : 4 * turn + 4]
        assert user["message"] == message_to_dict(UserMessage(content=fixed))
        assert response["message"] == message_to_dict(answer(fixed))
        assert response["raw"] == {fixed: fixed}
        assert result["message"]["content"] == result["message"]["name"] == fixed
        assert result["message"]["error"]["message"] == fixed
        assert (guard["guard"], guard["detail"]) == (fixed, fixed)


@PROPERTY_SETTINGS
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
def test_a_replayed_trace_answers_each_turn_with_its_text_repaired(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        model = ReplayModel(record(Path(directory), texts))

    for turn, text in enumerate(texts):
        request = ModelRequest(system="", messages=(), turn=turn)
        response = asyncio.run(model.complete(request))
        assert response.to_message() == answer(repair_text(text))
        assert response.raw == {repair_text(text): repair_text(text)}
