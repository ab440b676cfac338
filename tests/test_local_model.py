"""The embedded model: its GGUF assembled and checked, its transcript and reply grammar, its
streamed replies, and whole agent runs on it that end well-formed whatever it writes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pi_runtime import Agent, Limits, ModelError, UserError
from pi_runtime.messages import (
    STOP_STATUS,
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_runtime.models import (
    ModelRequest,
    ModelSettings,
    ResponseDone,
    TextDelta,
    ToolCallDelta,
)
from pi_runtime.models.local import LocalModel
from pi_runtime.models.local import files as local_files
from pi_runtime.models.local.files import GEMMA_SHA256, assemble_gguf, cache_dir
from pi_runtime.models.local.prompt import inline_refs, render_prompt, reply_schema
from pi_runtime.models.local.reply import ReplyParser
from pi_runtime.models.spec import resolve_model

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the examples live beside the package, not inside it

from examples.weather.tools import TOOLS  # noqa: E402

DEFINITIONS = tuple(t.definition for t in TOOLS)
SCHEMAS = {d.name: d.parameters for d in DEFINITIONS}


# --- assembling the GGUF --------------------------------------------------------------


def chunks(tmp_path: Path, *parts: bytes) -> list[Path]:
    paths = []
    for i, part in enumerate(parts):
        path = tmp_path / f"model.gguf.part{i:02d}"
        path.write_bytes(part)
        paths.append(path)
    return paths


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_chunks_are_joined_once_and_the_stamp_spares_the_next_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = chunks(tmp_path, b"GGUF", b"-weights-", b"tail")
    target = tmp_path / "cache" / "model.gguf"

    assert assemble_gguf(parts, sha(b"GGUF-weights-tail"), target) == target
    assert target.read_bytes() == b"GGUF-weights-tail"

    def no_hashing(path: Path) -> str:
        raise AssertionError("an unchanged, stamped file must not be hashed again")

    monkeypatch.setattr(local_files, "_file_sha256", no_hashing)
    assert assemble_gguf(parts, sha(b"GGUF-weights-tail"), target) == target


def test_a_corrupted_cached_file_is_not_used_but_rebuilt(tmp_path: Path) -> None:
    parts = chunks(tmp_path, b"GGUF", b"-weights")
    target = tmp_path / "model.gguf"
    assemble_gguf(parts, sha(b"GGUF-weights"), target)

    target.write_bytes(b"GGUF-wEights")  # a flipped byte, new mtime
    os.utime(target, ns=(1, 1))

    assemble_gguf(parts, sha(b"GGUF-weights"), target)
    assert target.read_bytes() == b"GGUF-weights"


def test_chunks_that_do_not_match_the_digest_are_rejected_and_leave_nothing(
    tmp_path: Path,
) -> None:
    parts = chunks(tmp_path, b"GGUF", b"-tampered")
    cache = tmp_path / "cache"
    cache.mkdir()
    target = cache / "model.gguf"
    target.write_bytes(b"an older, wrong file")

    with pytest.raises(ModelError) as caught:
        assemble_gguf(parts, sha(b"GGUF-weights"), target)

    assert "corrupt" in caught.value.message
    assert sha(b"GGUF-tampered") in caught.value.message
    assert sha(b"GGUF-weights") in caught.value.message
    assert list(cache.iterdir()) == []  # neither the bad build nor the wrong old file


def test_the_cache_directory_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PI_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "pi"

    monkeypatch.setenv("PI_CACHE_DIR", str(tmp_path / "pi"))
    assert cache_dir() == tmp_path / "pi"


def test_the_shipped_package_assembles_to_the_pinned_gguf() -> None:
    path = local_files.embedded_model_path()

    assert local_files._file_sha256(path) == GEMMA_SHA256
    assert path.read_bytes()[:4] == b"GGUF"


# --- transcript and reply schema ------------------------------------------------------


def test_the_reply_schema_follows_the_tool_choice() -> None:
    def branches(choice: str) -> list[Any]:
        schema = reply_schema(DEFINITIONS, choice)
        options = schema.get("oneOf", [schema])
        return [o["properties"].get("tool", {}).get("const", "answer") for o in options]

    assert branches("auto") == ["get_weather", "create_reminder", "answer"]
    assert branches("required") == ["get_weather", "create_reminder"]
    assert branches("none") == ["answer"]
    assert branches("create_reminder") == ["create_reminder"]
    assert reply_schema((), "auto")["required"] == ["answer"]
    with pytest.raises(ModelError, match="not offered"):
        reply_schema(DEFINITIONS, "delete_everything")


def test_a_valid_call_and_an_answer_match_the_reply_schema_and_others_do_not() -> None:
    schema = reply_schema(DEFINITIONS, "auto")

    jsonschema.validate({"tool": "get_weather", "arguments": {"city": "北京"}}, schema)
    jsonschema.validate({"answer": "晴"}, schema)
    for bad in (
        {"tool": "get_weather", "arguments": {"town": "北京"}},
        {"tool": "send_email", "arguments": {}},
        {"answer": "晴", "tool": "get_weather"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_a_tool_schema_the_grammar_cannot_express_still_gets_a_grammar() -> None:
    from pi_runtime.models import ToolDefinition
    from pi_runtime.models.local.engine import reply_grammar

    odd = ToolDefinition(
        name="odd",
        description="A tool with a `not` in its schema.",
        parameters={"type": "object", "properties": {"x": {"not": {"type": "string"}}}},
    )

    grammar = reply_grammar((*DEFINITIONS, odd), "auto")

    assert '"\\"odd\\""' in grammar  # still callable, with any object as arguments
    assert '"\\"city\\""' in grammar  # the other tools keep their schemas


def test_references_are_inlined_so_the_tool_schema_can_nest_under_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"where": {"$ref": "#/$defs/Place"}},
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }

    inlined = inline_refs(schema)

    assert inlined["properties"]["where"]["properties"]["city"] == {"type": "string"}
    assert "$defs" not in inlined


def test_the_transcript_shows_tools_calls_results_and_ends_at_the_next_reply() -> None:
    prompt = render_prompt(
        "Be brief.",
        (
            UserMessage(content="北京天气？\n要带伞吗？"),
            AssistantMessage(
                content=(
                    ToolCall(
                        id="c",
                        name="get_weather",
                        raw='{"city":"北京"}',
                        arguments={"city": "北京"},
                    ),
                )
            ),
            ToolResultMessage(tool_call_id="c", name="get_weather", content='{"sky": "小雨"}'),
            AssistantMessage(content=(TextBlock(text="有小雨。"),)),
        ),
        DEFINITIONS,
    )

    assert prompt.startswith("Be brief.")
    for definition in DEFINITIONS:
        assert f"- {definition.name}: " in prompt
        assert json.dumps(definition.parameters["properties"], ensure_ascii=False)[:20] in prompt
    assert "User: 北京天气？ 要带伞吗？" in prompt  # one turn, one line
    assert 'Assistant: {"tool": "get_weather", "arguments": {"city": "北京"}}' in prompt
    assert 'Result of get_weather: {"sky": "小雨"}' in prompt
    assert 'Assistant: {"answer": "有小雨。"}' in prompt
    assert prompt.endswith("\nAssistant:")


# --- reading the reply as it streams --------------------------------------------------


def feed(parser: ReplyParser, text: str, size: int = 3) -> list[Any]:
    events: list[Any] = []
    for i in range(0, len(text), size):
        events.extend(parser.feed(text[i : i + size]))
    return events


def test_a_streamed_call_gives_its_name_first_then_exactly_its_arguments() -> None:
    parser = ReplyParser(call_id="call_0_0")
    events = feed(parser, '{"tool": "get_weather", "arguments": {"city": "北}京"} } ')
    events += parser.flush(cut=False)

    response = parser.response(cut=False, usage=_usage(), model="local:test")

    assert isinstance(events[0], ToolCallDelta) and events[0].name == "get_weather"
    (made,) = response.tool_calls
    assert made.raw == '{"city": "北}京"}'
    assert "".join(e.arguments_delta for e in events) == made.raw
    assert made.arguments == {"city": "北}京"} and not made.truncated
    assert response.finish_reason == "tool_calls"


def test_a_streamed_answer_is_decoded_as_it_comes() -> None:
    parser = ReplyParser(call_id="call_0_0")
    events = feed(parser, '{"answer": "雨\\n带伞 \\u2614 \\"好\\""}', size=2)

    response = parser.response(cut=False, usage=_usage(), model="local:test")

    assert all(isinstance(e, TextDelta) for e in events)
    assert "".join(e.text for e in events) == '雨\n带伞 ☔ "好"'
    assert response.content == (TextBlock(text='雨\n带伞 ☔ "好"'),)
    assert response.finish_reason == "stop"


def test_a_reply_cut_by_the_limit_marks_its_call_truncated() -> None:
    parser = ReplyParser(call_id="call_0_0", tool_names=("get_weather", "create_reminder"))
    feed(parser, '{"tool": "get_weather", "arguments": {"city": "北')

    response = parser.response(cut=True, usage=_usage(), model="local:test")

    (cut,) = response.tool_calls
    assert cut.truncated and cut.arguments is None and cut.raw == '{"city": "北'
    assert response.finish_reason == "length"


def test_a_reply_cut_inside_the_tool_name_is_a_truncated_call_of_the_only_match() -> None:
    parser = ReplyParser(call_id="call_0_0", tool_names=("get_weather", "create_reminder"))
    feed(parser, '{"tool": "get_w')

    (cut,) = parser.response(cut=True, usage=_usage(), model="local:test").tool_calls

    assert cut.name == "get_weather" and cut.truncated


def _usage() -> Any:
    from pi_runtime.messages import Usage

    return Usage(input_tokens=10, output_tokens=5)


# --- setting up the model -------------------------------------------------------------


def test_without_llama_cpp_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )

    with pytest.raises(UserError, match=r"pip install 'pi-runtime\[local\]'"):
        resolve_model("local")


def test_a_missing_gguf_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        resolve_model(f"local:{tmp_path / 'nothing.gguf'}")


def test_local_is_the_default_model_and_loads_nothing_until_asked() -> None:
    model = resolve_model(None)

    assert isinstance(model, LocalModel) and model.name == "local"


# --- the real model -------------------------------------------------------------------


def complete(model: LocalModel, request: ModelRequest) -> tuple[list[Any], Any]:
    async def go() -> list[Any]:
        return [event async for event in model.stream(request)]

    events = asyncio.run(go())
    done = [e for e in events if isinstance(e, ResponseDone)]
    assert len(done) == 1 and events[-1] is done[0]
    return events, done[0].response


def assert_call_or_answer(response: Any) -> None:
    """The grammar's promise: a finished reply is one valid call or one answer."""
    if response.finish_reason == "length":
        assert all(c.truncated for c in response.tool_calls)
        return
    if response.tool_calls:
        (made,) = response.tool_calls
        assert response.content == (made,) and not made.truncated
        jsonschema.validate(made.arguments, SCHEMAS[made.name])
    else:
        (answer,) = response.content
        assert isinstance(answer, TextBlock)


PROMPTS = [
    "北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。",
    "上海明天会下雨吗？",
    "提醒我明天早上八点开会。",
    "Hello! Who are you?",
    "What is 2 + 2?",
]


@pytest.mark.slow
@pytest.mark.parametrize("choice", ["auto", "required", "none", "create_reminder"])
def test_every_reply_is_a_schema_valid_call_or_an_answer_and_honours_the_choice(
    choice: str,
) -> None:
    model = LocalModel(max_tokens=96)

    for prompt in PROMPTS:
        events, response = complete(
            model,
            ModelRequest(
                system="You are a helpful assistant.",
                messages=(UserMessage(content=prompt),),
                tools=DEFINITIONS,
                tool_choice=choice,
            ),
        )

        assert_call_or_answer(response)
        names = [c.name for c in response.tool_calls]
        if choice == "none":
            assert names == []
        elif choice == "required":
            assert len(names) == 1
        elif choice == "create_reminder":
            assert names == ["create_reminder"]
        streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert streamed == "".join(b.text for b in response.content if isinstance(b, TextBlock))
        assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


@pytest.mark.slow
def test_a_second_call_reuses_the_cached_prompt_prefix() -> None:
    model = LocalModel(max_tokens=16)
    request = ModelRequest(
        system="You are a helpful assistant.",
        messages=(UserMessage(content="北京天气？"),),
        tools=DEFINITIONS,
        tool_choice="none",
        settings=ModelSettings(max_tokens=8),
    )

    _, first = complete(model, request)
    _, second = complete(model, request)

    assert second.usage.input_tokens == first.usage.input_tokens
    assert second.usage.cached_tokens == second.usage.input_tokens - 1
    # Not asserted: the same reply. Logits from a reused cache differ from a fresh batch in
    # the last bits, which can flip a near tie even under greedy decoding.


@pytest.mark.slow
def test_a_conversation_longer_than_the_context_is_a_clear_model_error() -> None:
    model = LocalModel(n_ctx=256)

    with pytest.raises(ModelError, match="context"):
        complete(
            model,
            ModelRequest(
                system="You are a helpful assistant.",
                messages=(UserMessage(content="天气 " * 400),),
                tools=DEFINITIONS,
            ),
        )


@pytest.mark.slow
@pytest.mark.parametrize("prompt", PROMPTS[:3], ids=["weather-reminder", "rain", "meeting"])
def test_a_weather_agent_on_local_ends_well_formed_within_its_guards(
    prompt: str, tmp_path: Path
) -> None:
    agent = Agent(
        "local", tools=TOOLS, trace_dir=tmp_path, limits=Limits(max_steps=4, wall_clock_s=240)
    )

    result = agent.run_sync(prompt)

    assert result.status == STOP_STATUS[result.stop_reason]
    assert result.stop_reason != "internal_error"
    assert result.steps <= 4
    answers = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert answers and all(m.model and m.model.startswith("local:") for m in answers)
    for reply in answers:
        assert_call_or_answer(reply)
    calls = [c.id for m in answers for c in m.tool_calls]
    results = [m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)]
    assert calls == results  # every call answered, in order
    assert result.usage.input_tokens > 0
    assert Path(str(result.trace)).is_file()
