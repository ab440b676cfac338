"""The OpenAI-compatible adapter: request mapping, stream folding, vendor entries, and real
HTTP against llama-cpp-python's OpenAI-compatible server running the embedded Gemma.

What the server needed (llama-cpp-python 0.3.x, Gemma 3 270M base): nothing special. With
the model's own chat template, a *named* `tool_choice` makes the server decode under a
grammar built from that tool's schema and answer with a streamed tool call; `auto` and
`required` give plain text. `--chat_format chatml-function-calling` supports `auto`, but
not when streaming ("Automatic streaming tool choice is not supported"), so the tests use
the default format and a named tool choice. The server sends no usage when streaming.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from pi_runtime import Agent, Limits, ModelError, RunResult, ToolSpec, UserError, tool
from pi_runtime.messages import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_runtime.models import ModelRequest, ModelSettings, ResponseDone, TextDelta, ToolCallDelta
from pi_runtime.models._openai_request import (
    chat_messages,
    chat_params,
    chat_tool_choice,
    strict_schema,
)
from pi_runtime.models.openai import OpenAIModel, StreamAccumulator, reached_output_limit
from pi_runtime.models.providers import VENDORS, custom_server, resolve_api_key
from pi_runtime.models.spec import resolve_model

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the examples live beside the package, not inside it

from examples.weather.tools import get_weather  # noqa: E402

WEATHER = get_weather.definition


def request(*messages: Any, **kwargs: Any) -> ModelRequest:
    return ModelRequest(system=kwargs.pop("system", "Be brief."), messages=messages, **kwargs)


def call(id_: str, raw: str, name: str = "get_weather") -> ToolCall:
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return ToolCall(
        id=id_, name=name, raw=raw, arguments=parsed if isinstance(parsed, dict) else None
    )


# --- request mapping -----------------------------------------------------------------


def test_conversation_maps_to_chat_messages_with_call_ids_and_results() -> None:
    messages = chat_messages(
        "Be brief.",
        (
            UserMessage(content="北京天气？"),
            AssistantMessage(
                content=(
                    TextBlock(text="查一下。", phase="commentary"),
                    call("call_1", '{"city":"北京"}'),
                )
            ),
            ToolResultMessage(tool_call_id="call_1", name="get_weather", content='{"sky":"晴"}'),
            AssistantMessage(content=(TextBlock(text="晴。"),)),
        ),
    )

    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "北京天气？"},
        {
            "role": "assistant",
            "content": "查一下。",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"北京"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"晴"}'},
        {"role": "assistant", "content": "晴。"},
    ]


def test_thinking_is_dropped_for_openai_and_sent_back_where_the_vendor_wants_it() -> None:
    answer = AssistantMessage(
        content=(ThinkingBlock(text="need weather"), call("c1", '{"city":"北京"}'))
    )

    plain = chat_messages("", (answer,))
    deepseek = chat_messages("", (answer,), reasoning_field="reasoning_content")

    assert "reasoning_content" not in plain[0]
    assert plain[0]["content"] == ""  # llama-cpp-python's server refuses null or none
    assert deepseek[0]["reasoning_content"] == "need weather"


def test_arguments_cut_off_mid_json_go_back_as_an_empty_object() -> None:
    cut = ToolCall(id="c1", name="get_weather", raw='{"city": "', truncated=True)

    (assistant,) = chat_messages("", (AssistantMessage(content=(cut,), finish_reason="length"),))

    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_maps_to_the_chat_completions_form(choice: str, expected: object) -> None:
    assert chat_tool_choice(choice) == expected


def test_a_request_without_tools_sends_no_tool_fields() -> None:
    params = chat_params(request(UserMessage(content="hi")), model="m", vendor=VENDORS["openai"])

    assert not {"tools", "tool_choice", "parallel_tool_calls"} & params.keys()
    assert params["stream"] is True
    assert params["stream_options"] == {"include_usage": True}


def test_tools_are_strict_for_openai_with_parallel_calls_and_its_output_limit_field() -> None:
    params = chat_params(
        request(
            UserMessage(content="hi"),
            tools=(WEATHER,),
            tool_choice="required",
            settings=ModelSettings(max_tokens=50, temperature=0),
        ),
        model="gpt-test",
        vendor=VENDORS["openai"],
    )

    function = params["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["city", "date"]  # date is nullable
    assert "default" not in function["parameters"]["properties"]["date"]
    assert params["tool_choice"] == "required"
    assert params["parallel_tool_calls"] is True
    assert params["max_completion_tokens"] == 50
    assert "max_tokens" not in params
    assert params["temperature"] == 0


def test_other_servers_get_max_tokens_and_the_schema_unchanged() -> None:
    params = chat_params(
        request(
            UserMessage(content="hi"),
            tools=(WEATHER,),
            tool_choice="none",
            settings=ModelSettings(max_tokens=50),
        ),
        model="m",
        vendor=custom_server("http://127.0.0.1:9"),
    )

    assert params["max_tokens"] == 50
    assert params["tools"][0]["function"]["parameters"] == WEATHER.parameters
    assert "strict" not in params["tools"][0]["function"]
    assert "parallel_tool_calls" not in params  # nothing to run in parallel under `none`


def test_strict_schema_refuses_an_optional_property_that_cannot_be_null() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        "required": ["q"],
        "additionalProperties": False,
    }

    assert strict_schema(schema) is None


def test_strict_schema_closes_nested_objects_and_keeps_a_property_named_default() -> None:
    schema = {
        "type": "object",
        "properties": {
            "default": {"type": "string"},
            "where": {
                "type": "object",
                "properties": {"x": {"type": ["integer", "null"]}},
                "additionalProperties": False,
            },
        },
        "required": ["default", "where"],
        "additionalProperties": False,
    }

    strict = strict_schema(schema)

    assert strict is not None
    assert "default" in strict["properties"]
    assert strict["properties"]["where"]["required"] == ["x"]
    assert schema["properties"]["where"].get("required") is None  # the input is untouched


# --- the truncated-arguments rule -----------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "raw", "output_tokens", "max_tokens", "cut"),
    [
        ("length", '{"city":"北京"}', 10, 50, True),  # the server says so
        ("tool_calls", '{ "city": "', 5, 5, True),  # the server lies: used all, broken JSON
        ("tool_calls", '{"city":"北京"}', 5, 5, False),  # used all, but the call is whole
        ("tool_calls", '{ "city": "', 3, 5, False),  # broken, but not by the limit
        ("tool_calls", '{ "city": "', 5, None, False),  # no limit was set
    ],
)
def test_a_call_is_truncated_when_the_output_limit_cut_it(
    finish: str, raw: str, output_tokens: int, max_tokens: int | None, cut: bool
) -> None:
    usage = Usage(output_tokens=output_tokens)

    assert reached_output_limit(finish, [call("c", raw)], usage, max_tokens) is cut


# --- folding the stream ---------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> Any:
    """A chunk parsed the way the SDK parses the stream (leniently, as servers vary)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return construct_type(
        type_=ChatCompletionChunk,
        value={
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": choices,
            **extra,
        },
    )


def test_chunks_fold_into_deltas_and_one_response_with_cached_usage() -> None:
    acc = StreamAccumulator(turn=0)
    events = []
    for piece in [
        chunk({"role": "assistant", "reasoning_content": "weather first"}),
        chunk({"content": "Checking."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"北京"}'}}]}),
        chunk(
            {"tool_calls": [{"index": 1, "function": {"name": "get_weather", "arguments": "{}"}}]}
        ),
        chunk({}, finish="tool_calls"),
        chunk(
            usage={
                "prompt_tokens": 120,
                "completion_tokens": 30,
                "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 64},
            }
        ),
    ]:
        events.extend(acc.add(piece))
    response = acc.response(max_tokens=None)

    assert [e.kind for e in events] == [
        "thinking_delta",
        "text_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
    ]
    thinking, text, first, second = response.content
    assert isinstance(thinking, ThinkingBlock) and thinking.text == "weather first"
    assert isinstance(text, TextBlock) and text.phase == "commentary"
    assert isinstance(first, ToolCall) and first.arguments == {"city": "北京"}
    assert first.id == "call_a" and not first.truncated
    assert isinstance(second, ToolCall) and second.id == "call_0_1"  # the server sent none
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=120, output_tokens=30, cached_tokens=64)
    assert response.model == "openai:gpt-test"
    raw_message = response.raw["choices"][0]["message"]
    assert raw_message["tool_calls"][0]["function"]["arguments"] == '{"city":"北京"}'
    assert response.raw["usage"]["prompt_tokens_details"]["cached_tokens"] == 64
    json.dumps(response.raw)  # the raw payload goes into traces as JSON


def test_a_lying_server_without_usage_still_gets_its_cut_call_marked_truncated() -> None:
    acc = StreamAccumulator(turn=2, vendor="openai-compatible")
    pieces = ['{ "', "city", '":', ' "']
    for i, text in enumerate(pieces):
        head = {"id": "call_x", "function": {"name": "get_weather", "arguments": text}}
        acc.add(
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, **(head if i == 0 else {"function": {"arguments": text}})}
                    ]
                }
            )
        )
    acc.add(chunk({}, finish="tool_calls"))

    response = acc.response(max_tokens=4)

    (cut,) = response.tool_calls
    assert cut.truncated and cut.arguments is None
    assert response.finish_reason == "length"
    assert response.usage.output_tokens == 4  # one token at least per chunk
    assert response.raw["choices"][0]["finish_reason"] == "tool_calls"  # what it said
    assert "usage" not in response.raw


def test_unnumbered_tool_calls_are_told_apart_by_their_ids() -> None:
    acc = StreamAccumulator(turn=0)
    for call_id, city in (("call_a", "北京"), ("call_b", "上海")):
        piece = {
            "id": call_id,
            "function": {"name": "get_weather", "arguments": f'{{"city":"{city}"}}'},
        }
        acc.add(chunk({"tool_calls": [piece]}))
    acc.add(chunk({}, finish="tool_calls"))

    calls = acc.response(max_tokens=None).tool_calls

    assert [(c.id, c.arguments) for c in calls] == [
        ("call_a", {"city": "北京"}),
        ("call_b", {"city": "上海"}),
    ]


def test_a_stream_that_ends_before_its_finish_reason_is_a_transient_error() -> None:
    acc = StreamAccumulator(turn=0)
    acc.add(chunk({"content": "half an ans"}))

    with pytest.raises(ModelError) as caught:
        acc.response(max_tokens=None)

    assert caught.value.transient


# --- vendors and specs ----------------------------------------------------------------


def test_a_missing_key_is_a_user_error_naming_the_variable() -> None:
    with pytest.raises(UserError, match="DEEPSEEK_API_KEY"):
        resolve_api_key(VENDORS["deepseek"], environ={})


def test_keyless_servers_need_no_key_and_use_one_when_set() -> None:
    assert resolve_api_key(VENDORS["ollama"], environ={})
    server = custom_server("http://127.0.0.1:8080/v1")
    assert resolve_api_key(server, environ={"OPENAI_API_KEY": "sk-local"}) == "sk-local"


def test_a_base_url_must_be_http() -> None:
    with pytest.raises(UserError, match="http"):
        custom_server("127.0.0.1:8080")


@pytest.mark.parametrize(
    ("spec", "base_url", "name"),
    [
        ("openai:gpt-4o-mini", None, "openai:gpt-4o-mini"),
        ("deepseek:deepseek-chat", None, "deepseek:deepseek-chat"),
        ("ollama:qwen2.5:7b", None, "ollama:qwen2.5:7b"),
        ("openrouter:openai/gpt-4o", None, "openrouter:openai/gpt-4o"),
        (
            "qwen2.5:7b",
            "http://127.0.0.1:9/v1",
            "openai-compatible:qwen2.5:7b@http://127.0.0.1:9/v1",
        ),
        (None, "http://127.0.0.1:9/v1", "openai-compatible:default@http://127.0.0.1:9/v1"),
        ("openai:gpt-4o", "http://127.0.0.1:9/v1", "openai:gpt-4o@http://127.0.0.1:9/v1"),
    ],
)
def test_specs_resolve_to_vendor_entries(
    spec: str | None, base_url: str | None, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(variable, "sk-test")

    model = resolve_model(spec, base_url=base_url)

    assert isinstance(model, OpenAIModel)
    assert model.name == name


@pytest.mark.parametrize(
    ("spec", "base_url", "message"),
    [
        ("openai:", None, "openai:MODEL"),
        ("openai:gpt-4o", None, "OPENAI_API_KEY"),
        ("mystery:model", None, "unknown model spec"),
        ("local", "http://127.0.0.1:9/v1", "--base-url"),
        ("scripted:x.json", "http://127.0.0.1:9/v1", "--base-url"),
    ],
)
def test_bad_specs_are_user_errors(
    spec: str, base_url: str | None, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(UserError, match=message):
        resolve_model(spec, base_url=base_url)


def test_without_the_openai_sdk_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail

    with pytest.raises(UserError, match=r"pip install 'pi-runtime\[openai\]'"):
        OpenAIModel("m", vendor=custom_server("http://127.0.0.1:9/v1"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_server_that_refuses_the_connection_is_a_transient_model_error() -> None:
    model = OpenAIModel("m", vendor=custom_server(f"http://127.0.0.1:{free_port()}/v1"))

    async def ask() -> None:
        try:
            async for _ in model.stream(request(UserMessage(content="hi"))):
                pass
        finally:
            await model.aclose()

    with pytest.raises(ModelError) as caught:
        asyncio.run(ask())

    assert caught.value.transient
    assert "could not reach" in caught.value.message


# --- real HTTP against llama-cpp-python's server --------------------------------------


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the embedded Gemma, on 127.0.0.1."""
    from pi_runtime.models.local.files import embedded_model_path

    model_path = embedded_model_path()
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "llama_cpp.server", "--model", str(model_path)),
                *("--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            # as Pi's own engine runs llama.cpp: waiting threads sleep, not spin, so the
            # server does not burn the CPU the other tests share
            env={"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"the server did not answer within 120 s:\n{log.read_text()[-3000:]}")


def stream_all(model: OpenAIModel, req: ModelRequest) -> list[Any]:
    async def collect() -> list[Any]:
        try:
            return [event async for event in model.stream(req)]
        finally:
            await model.aclose()

    return asyncio.run(collect())


def server_model(url: str) -> OpenAIModel:
    return OpenAIModel("gemma-3-270m", vendor=custom_server(url))


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_streamed_answer_arrives_in_pieces_and_ends_in_one_response(server_url: str) -> None:
    events = stream_all(
        server_model(server_url),
        request(
            UserMessage(content="Write one sentence about the sea."),
            settings=ModelSettings(max_tokens=16, temperature=0),
        ),
    )

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    done = [e for e in events if isinstance(e, ResponseDone)]
    assert len(texts) > 1
    assert len(done) == 1 and events[-1] is done[0]
    response = done[0].response
    assert response.content and "".join(texts) == response.content[0].text  # type: ignore[union-attr]
    assert response.finish_reason in ("stop", "length")
    assert response.raw["choices"][0]["message"]["content"] == "".join(texts)
    assert 0 < response.usage.output_tokens <= 16


def stream_the_weather_call(server_url: str, max_tokens: int) -> list[Any]:
    """The events of one streamed request for Beijing's weather that must call get_weather."""
    return stream_all(
        server_model(server_url),
        request(
            UserMessage(content="北京今天天气怎么样？"),
            tools=(WEATHER,),
            tool_choice="get_weather",
            settings=ModelSettings(max_tokens=max_tokens, temperature=0),
        ),
    )


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_named_tool_choice_streams_a_schema_valid_call(server_url: str) -> None:
    events = stream_the_weather_call(server_url, 64)

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0].name == "get_weather" and deltas[0].id
    response = events[-1].response
    (made,) = response.tool_calls
    assert made.name == "get_weather" and not made.truncated
    assert made.raw == "".join(d.arguments_delta for d in deltas)
    assert made.arguments is not None
    jsonschema.validate(made.arguments, WEATHER.parameters)
    assert response.finish_reason == "tool_calls"


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_call_cut_at_max_tokens_is_truncated_although_the_server_says_tool_calls(
    server_url: str,
) -> None:
    events = stream_the_weather_call(server_url, 5)

    response = events[-1].response
    (cut,) = response.tool_calls
    assert response.raw["choices"][0]["finish_reason"] == "tool_calls"  # the server's claim
    assert cut.truncated and cut.arguments is None
    assert response.finish_reason == "length"


def ask_the_weather(
    server_url: str, get_weather: ToolSpec, max_tokens: int, tmp_path: Path
) -> RunResult:
    """Beijing's weather from the server's model, made to call `get_weather` first, in at
    most two model calls of `max_tokens` each."""
    agent = Agent(
        server_model(server_url),
        tools=[get_weather],
        settings=ModelSettings(max_tokens=max_tokens, temperature=0),
        trace_dir=tmp_path,
        limits=Limits(max_steps=2),
    )
    return agent.run_sync("北京今天天气怎么样？", next_tool_choice="get_weather")


@pytest.mark.slow
@pytest.mark.embedded_model
def test_the_gate_refuses_a_call_cut_off_by_the_output_limit(
    server_url: str, tmp_path: Path
) -> None:
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        ran.append(city)
        return "晴"

    result = ask_the_weather(server_url, get_weather, 5, tmp_path)

    assert ran == []
    first_result = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert first_result.is_error
    assert json.loads(first_result.content)["kind"] == "truncated_call"
    assert result.metrics["tool_argument_truncation_count"] >= 1
    assert result.status in ("completed", "stopped")  # ended well-formed either way


@pytest.mark.slow
@pytest.mark.embedded_model
def test_an_agent_run_over_http_calls_the_tool_and_records_usage(
    server_url: str, tmp_path: Path
) -> None:
    cities: list[str] = []

    @tool
    def get_weather(city: str) -> dict[str, str]:
        """Weather of a city.

        Args:
            city: the city's name.
        """
        cities.append(city)
        return {"city": city, "sky": "晴"}

    result = ask_the_weather(server_url, get_weather, 48, tmp_path)

    assert len(cities) == 1 and cities[0]
    answers = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert result.usage.output_tokens == sum(m.usage.output_tokens for m in answers) > 0
    recorded = [
        json.loads(line)
        for line in Path(result.trace).read_text(encoding="utf-8").splitlines()  # type: ignore[arg-type]
        if '"model_response"' in line
    ]
    assert recorded[0]["raw"]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.slow
@pytest.mark.embedded_model
def test_pi_run_with_base_url_uses_the_server(server_url: str, tmp_path: Path) -> None:
    pi = Path(sys.executable).parent / "pi"
    done = subprocess.run(
        [
            str(pi),
            "run",
            "北京今天天气怎么样？",
            "--base-url",
            server_url,
            "--tools",
            "examples.weather.tools:TOOLS",
            "--tool-choice",
            "get_weather",
            "--max-steps",
            "1",
            "--trace-dir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)
    assert result["steps"] == 1
    first = result["messages"][1]
    assert [b["name"] for b in first["content"] if b["kind"] == "tool_call"] == ["get_weather"]
