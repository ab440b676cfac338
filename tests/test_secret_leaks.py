"""Keys from the environment and credentials in URLs never reach a RunResult, a trace or
stderr: a local server on 127.0.0.1 echoes them back in its error bodies, as real
providers and proxies do, and a tool puts one into its exception."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import openai
import pytest

from cli_support import Ran, pi_inprocess, pi_process
from pi_runtime import Agent, Limits, ModelError, RunResult, ToolCall, ToolError, UserError, tool
from pi_runtime.messages import ToolResultMessage, redact
from pi_runtime.models import Model, resolve_model
from pi_runtime.models.anthropic import AnthropicModel
from pi_runtime.models.classify import classify_provider_error
from pi_runtime.models.providers import VENDORS, custom_server
from pi_runtime.testing import ScriptedModel
from pi_runtime.tools import Gate, classify

OPENAI_KEY = "sk-test-0123456789abcdefLEAK"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefLEAK"
SERVER_KEY = "0a1b2c3d4e5f-query-LEAK"
PASSWORD = "secretpass-LEAK"


class _Echo(BaseHTTPRequestHandler):
    """Refuses every call with a body that repeats what the caller sent."""

    status = 401

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        heard = " ".join(
            f"{name}={value}"
            for name, value in self.headers.items()
            if name.lower() in ("authorization", "x-api-key")
        )
        message = f"Incorrect API key provided ({heard}) for {self.path} at {self.server.url}"  # type: ignore[attr-defined]
        body = json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        ).encode()
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


class _BadRequest(_Echo):
    status = 400


@pytest.fixture(params=[_Echo, _BadRequest], ids=["401", "400"])
def server_port(request: pytest.FixtureRequest) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), request.param)
    port = server.server_address[1]
    # what a proxy would echo: the URL it was reached at, credentials and all
    server.url = f"http://user:{PASSWORD}@127.0.0.1:{port}/v1?api_key={SERVER_KEY}"  # type: ignore[attr-defined]
    # a short poll: shutdown() waits up to one poll (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in (OPENAI_KEY, ANTHROPIC_KEY, SERVER_KEY, PASSWORD, "LEAK"):
            assert secret not in text, f"{secret!r} leaked into: {text[:2000]}"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both providers' keys in the environment, for the clients to send (and leak)."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


def run_once(model: Model, tmp_path: Path) -> RunResult:
    """One run of `model`, tracing to `tmp_path`, with no retry of the refused call."""
    return Agent(model, trace_dir=tmp_path, limits=Limits(model_retries=0)).run_sync("hello")


def everything_of(result: RunResult) -> str:
    trace = Path(result.trace).read_bytes().decode() if result.trace else ""
    return result.to_json() + trace


def test_a_provider_error_echoing_the_key_is_redacted_in_the_result_and_trace(
    server_port: int, keys: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model = resolve_model("openai:gpt-4o-mini", base_url=f"http://127.0.0.1:{server_port}/v1")

    result = run_once(model, tmp_path)

    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert result.error is not None and "[redacted]" in result.error
    assert_no_secret(everything_of(result), capfd.readouterr().err)


def test_credentials_in_the_base_url_stay_out_of_the_model_name_result_and_trace(
    server_port: int, keys: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:{server_port}/v1?api_key={SERVER_KEY}"

    model = resolve_model("qwen2.5:7b", base_url=url)
    result = run_once(model, tmp_path)

    assert model.name == (
        f"openai-compatible:qwen2.5:7b@http://***@127.0.0.1:{server_port}/v1?api_key=[redacted]"
    )
    assert result.stop_reason == "model_error"
    assert_no_secret(model.name, everything_of(result), capfd.readouterr().err)


def test_anthropic_errors_echoing_the_key_are_redacted(
    server_port: int, keys: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model = AnthropicModel("claude-sonnet-4-6", base_url=f"http://127.0.0.1:{server_port}")

    result = run_once(model, tmp_path)

    assert result.stop_reason == "model_error"
    assert_no_secret(everything_of(result), capfd.readouterr().err)


class _EchoBare(_Echo):
    """Echoes the key alone, without the `Bearer` that would give its shape away."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        sent = self.headers.get("x-api-key") or self.headers.get("authorization", "")
        body = json.dumps(
            {"type": "error", "error": {"type": "authentication_error",
                                        "message": f"invalid x-api-key: {sent.split()[-1]}"}}
        ).encode()  # fmt: skip
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_key_given_in_code_not_shaped_like_one_is_redacted_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # a gateway's key passed as `api_key=`: no variable names it and it has no `sk-`
    # shape, so a 401 echoing it reached the error, the result JSON and the trace
    gateway = "gw-9f8e7d6c5b4a39281706LEAK"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoBare)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        model = AnthropicModel("claude-sonnet-4-6", api_key=gateway, base_url=url)
        result = run_once(model, tmp_path)
    finally:
        server.shutdown()
        server.server_close()

    assert result.stop_reason == "model_error" and "[redacted]" in (result.error or "")
    assert_no_secret(everything_of(result), capfd.readouterr().err)
    # a placeholder (LM Studio's documented `lm-studio`) is no secret: kept readable
    AnthropicModel("claude-sonnet-4-6", api_key="lm-studio", base_url=url)
    assert redact("cannot reach lm-studio at localhost") == "cannot reach lm-studio at localhost"


@tool
def leaky() -> str:
    """Fails with the API key in its message, as a careless client library might."""
    raise RuntimeError(f"auth failed with {os.environ['OPENAI_API_KEY']}")


def test_a_tool_exception_carrying_the_key_reaches_neither_the_model_nor_the_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    model = ScriptedModel([{"tool_calls": [{"name": "leaky", "arguments": {}}]}, {"text": "sorry"}])

    result = Agent(model, tools=[leaky], trace_dir=tmp_path).run_sync("go")

    seen = model.requests[1].messages[-1]
    assert isinstance(seen, ToolResultMessage) and seen.is_error
    assert "sk-…[redacted]" in seen.content
    assert_no_secret(repr(seen), everything_of(result))


def test_pi_run_prints_no_credentials_on_stderr(server_port: int, tmp_path: Path) -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:{server_port}/v1?api_key={SERVER_KEY}"
    env: dict[str, str | None] = {"OPENAI_API_KEY": OPENAI_KEY}
    args = ["run", "hello", "--base-url", url, "--trace-dir", str(tmp_path)]
    # human output in-process; --json as the console script, where stdout is fd 1
    done: Ran | subprocess.CompletedProcess[str] = pi_inprocess(*args, cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    assert_no_secret(done.stdout, done.stderr)
    done = pi_process(*args, "--json", cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    assert_no_secret(done.stdout, done.stderr)
    for trace in tmp_path.glob("*"):
        assert_no_secret(trace.read_text(encoding="utf-8"))


def test_a_session_refuses_to_store_credentials_from_the_base_url(
    server_port: int, tmp_path: Path
) -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:{server_port}/v1?api_key={SERVER_KEY}"
    db = tmp_path / "pi.db"
    done = pi_inprocess(
        "run", "hello", "--base-url", url, "--session", "s1", "--db", f"sqlite:///{db}",
        "--trace-dir", str(tmp_path), cwd=tmp_path, env={"OPENAI_API_KEY": OPENAI_KEY},
    )  # fmt: skip
    assert done.returncode == 2
    assert "holds credentials" in done.stderr
    assert_no_secret(done.stdout, done.stderr)
    stored = db.read_bytes().decode("utf-8", "replace") if db.exists() else ""
    assert_no_secret(stored)


# --- layer by layer -------------------------------------------------------------------


def test_a_key_at_the_length_cut_of_an_error_is_not_left_half_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    body = {"error": {"message": "x" * 280 + f" {OPENAI_KEY}", "type": "invalid_request_error"}}
    exc = openai.BadRequestError(
        "Error code: 400",
        response=httpx2.Response(400, request=httpx2.Request("POST", "http://127.0.0.1/v1")),
        body=body["error"],
    )

    error = classify_provider_error(exc, provider="openai")

    assert OPENAI_KEY[:10] not in error.message
    assert "sk-…[redacted]" in error.message


def test_a_model_error_raised_with_a_key_in_it_comes_out_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)

    error = classify_provider_error(
        ModelError(f"refused {OPENAI_KEY}", transient=True, retry_after_s=2.0), provider="openai"
    )

    assert (error.message, error.transient, error.retry_after_s) == (
        "refused sk-…[redacted]",
        True,
        2.0,
    )


def test_a_base_url_shows_no_credentials_in_labels_or_usage_errors() -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:9/v1?token={SERVER_KEY}"

    with pytest.raises(UserError) as caught:
        custom_server(url.replace("http://", "ftp://"))

    labels = [custom_server(url).display, custom_server(url, like=VENDORS["deepseek"]).display]
    assert_no_secret(str(caught.value), *labels)
    assert labels[0] == "the server at http://***@127.0.0.1:9/v1?token=[redacted]"


def test_a_tool_failure_naming_the_key_in_message_and_hint_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)

    _, info = classify(ToolError(f"bad key {OPENAI_KEY}", hint=f"rotate {OPENAI_KEY}"))
    _, lookup = classify(KeyError(OPENAI_KEY))

    assert (info.message, info.hint) == ("bad key sk-…[redacted]", "rotate sk-…[redacted]")
    assert lookup.message == "not found: 'sk-…[redacted]'"


@tool
def count(n: int) -> int:
    """Counts to n."""
    return n


def test_a_schema_error_quoting_a_key_in_the_arguments_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    gate = Gate([count], session_id="s")
    call = ToolCall(id="c1", name="count", raw=json.dumps({"n": OPENAI_KEY}))

    outcome = asyncio.run(gate.run(call))

    assert outcome.message is not None and outcome.message.is_error
    assert_no_secret(outcome.message.content)
    assert "sk-…[redacted]" in outcome.message.content
