"""Provider failures become `ModelError`s: transient ones are retried, the rest end the run."""

from __future__ import annotations

import asyncio
import email.utils
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from pi_runtime import Agent, Limits, ModelError, ModelRequest
from pi_runtime.models.classify import classify_provider_error, retry_after_seconds
from pi_runtime.testing import FunctionModel

SDKS = {"openai": openai, "anthropic": anthropic}
URLS = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "anthropic": "https://api.anthropic.com/v1/messages",
}


def response(provider: str, status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(
        status, headers=headers or {}, request=httpx2.Request("POST", URLS[provider])
    )


def body(provider: str, kind: str, message: str) -> dict[str, Any]:
    """The error body each SDK hands to its exception (OpenAI's SDK unwraps `error`)."""
    if provider == "openai":
        return {"message": message, "type": kind, "code": kind, "param": None}
    return {"type": "error", "error": {"type": kind, "message": message}}


def status_error(
    provider: str,
    cls: str,
    status: int,
    kind: str,
    message: str = "",
    headers: dict[str, str] | None = None,
) -> Exception:
    error_class = getattr(SDKS[provider], cls)
    error: Exception = error_class(
        f"Error code: {status}",
        response=response(provider, status, headers),
        body=body(provider, kind, message),
    )
    return error


def classify(exc: BaseException, provider: str = "openai") -> ModelError:
    return classify_provider_error(exc, provider=provider)


BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


# -- transient ---------------------------------------------------------------------------


@BOTH
def test_rate_limit_is_transient_and_honours_retry_after_seconds(provider: str) -> None:
    exc = status_error(
        provider, "RateLimitError", 429, "rate_limit_error", "slow down", {"retry-after": "7"}
    )
    error = classify(exc, provider)
    assert error.transient
    assert error.retry_after_s == 7.0
    assert error.message.startswith(f"{provider} rate limit (HTTP 429")
    assert "slow down" in error.message


@BOTH
def test_rate_limit_honours_retry_after_as_an_http_date(provider: str) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    exc = status_error(
        provider, "RateLimitError", 429, "rate_limit_error", "", {"Retry-After": when}
    )
    after = classify(exc, provider).retry_after_s
    assert after is not None and 100 < after <= 121


@BOTH
def test_retry_after_ms_wins_over_retry_after(provider: str) -> None:
    headers = {"retry-after-ms": "1500", "retry-after": "9"}
    exc = status_error(provider, "RateLimitError", 429, "rate_limit_error", "", headers)
    assert classify(exc, provider).retry_after_s == 1.5


@BOTH
def test_rate_limit_without_a_hint_leaves_the_backoff_to_the_runtime(provider: str) -> None:
    exc = status_error(provider, "RateLimitError", 429, "rate_limit_error")
    error = classify(exc, provider)
    assert error.transient and error.retry_after_s is None


def test_retry_after_parsing_edge_cases() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=now) == 30.0
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_seconds({"retry-after": past}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "nan"}) is None
    assert retry_after_seconds({"retry-after-ms": "oops", "retry-after": "2"}) == 2.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds(None) is None


@BOTH
@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_transient(provider: str, status: int) -> None:
    exc = status_error(provider, "InternalServerError", status, "api_error", "boom")
    error = classify(exc, provider)
    assert error.transient
    assert f"HTTP {status}" in error.message


def test_anthropic_overloaded_529_is_transient_with_its_retry_hint() -> None:
    exc = status_error(
        "anthropic",
        "InternalServerError",
        529,
        "overloaded_error",
        "Overloaded",
        {"retry-after": "3"},
    )
    error = classify(exc, "anthropic")
    assert error.transient and error.retry_after_s == 3.0
    assert "anthropic is overloaded (HTTP 529, overloaded_error)" in error.message


def test_error_event_inside_a_200_stream_is_classified_by_its_type() -> None:
    # the Anthropic SDK raises a status error carrying the stream's 200 response
    exc = status_error("anthropic", "APIStatusError", 200, "overloaded_error", "Overloaded")
    assert classify(exc, "anthropic").transient
    # the OpenAI SDK raises a bare APIError with the error object as body
    request = httpx2.Request("POST", URLS["openai"])
    server = openai.APIError("boom", request, body={"type": "server_error", "message": "boom"})
    assert classify(server).transient
    bad = openai.APIError("no", request, body={"message": "bad schema", "code": 400})
    error = classify(bad)
    assert not error.transient and "(HTTP 400)" in error.message


@BOTH
def test_sdk_timeouts_and_connection_errors_are_transient(provider: str) -> None:
    request = httpx2.Request("POST", URLS[provider])
    sdk = SDKS[provider]
    timeout = classify(sdk.APITimeoutError(request=request), provider)
    assert timeout.transient and "did not answer in time" in timeout.message
    connection = classify(sdk.APIConnectionError(request=request), provider)
    assert connection.transient and f"could not reach {provider}" in connection.message


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("read timed out"),
        httpx2.ConnectTimeout("connect timed out"),
        httpx.ConnectError("connection refused"),
        httpx2.RemoteProtocolError("peer closed connection"),
        TimeoutError(),
        ConnectionResetError("reset by peer"),
    ],
    ids=lambda e: type(e).__module__.partition(".")[0] + "." + type(e).__name__,
)
def test_plain_http_and_network_errors_are_transient(exc: BaseException) -> None:
    assert classify(exc, "ollama").transient


def test_httpx_status_error_uses_its_response_status() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:8080/v1/chat/completions")
    busy = httpx.HTTPStatusError(
        "busy", request=request, response=httpx.Response(503, request=request)
    )
    assert classify(busy, "llama").transient
    missing = httpx.HTTPStatusError(
        "missing", request=request, response=httpx.Response(404, request=request)
    )
    assert not classify(missing, "llama").transient


# -- unrecoverable, with a message a user can act on ---------------------------------------


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
    ],
)
def test_rejected_key_names_the_variable_to_check(provider: str, variable: str) -> None:
    sdk = "anthropic" if provider == "anthropic" else "openai"
    exc = status_error(sdk, "AuthenticationError", 401, "authentication_error", "invalid x-api-key")
    error = classify(exc, provider)
    assert not error.transient
    assert variable in error.message
    assert error.message.startswith(f"{provider} rejected the API key (HTTP 401")


def test_key_of_a_custom_server_is_described_not_guessed() -> None:
    exc = status_error("openai", "AuthenticationError", 401, "invalid_api_key")
    assert "the API key configured for vllm" in classify(exc, "vllm").message


@BOTH
def test_permission_denied_is_unrecoverable(provider: str) -> None:
    exc = status_error(provider, "PermissionDeniedError", 403, "permission_error", "no access")
    error = classify(exc, provider)
    assert not error.transient
    assert "denied access (HTTP 403" in error.message and "--model" in error.message


def test_exhausted_quota_is_unrecoverable_though_it_comes_as_429() -> None:
    exc = status_error(
        "openai",
        "RateLimitError",
        429,
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
        {"retry-after": "1"},
    )
    error = classify(exc, "openai")
    assert not error.transient
    assert error.retry_after_s is None
    assert "quota or credit is used up" in error.message and "insufficient_quota" in error.message


def test_anthropic_low_credit_is_a_quota_error() -> None:
    exc = status_error(
        "anthropic",
        "BadRequestError",
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API.",
    )
    error = classify(exc, "anthropic")
    assert not error.transient and "quota or credit" in error.message


def test_payment_required_is_a_quota_error() -> None:
    exc = status_error("anthropic", "APIStatusError", 402, "billing_error", "billing")
    assert "quota or credit" in classify(exc, "openrouter").message


@BOTH
@pytest.mark.parametrize(
    ("cls", "status"),
    [("BadRequestError", 400), ("UnprocessableEntityError", 422)],
)
def test_bad_request_is_unrecoverable(provider: str, cls: str, status: int) -> None:
    exc = status_error(provider, cls, status, "invalid_request_error", "tools.0: bad schema")
    error = classify(exc, provider)
    assert not error.transient
    assert f"{provider} rejected the request (HTTP {status}" in error.message
    assert "tools.0: bad schema" in error.message


@BOTH
def test_unknown_model_points_at_the_model_spec(provider: str) -> None:
    exc = status_error(provider, "NotFoundError", 404, "not_found_error", "model: claude-x")
    error = classify(exc, provider)
    assert not error.transient
    assert "--model" in error.message and "does not know this model" in error.message


@pytest.mark.parametrize(
    ("provider", "kind", "message"),
    [
        (
            "openai",
            "context_length_exceeded",
            "This model's maximum context length is 8192 tokens. However, you requested 9000.",
        ),
        (
            "anthropic",
            "invalid_request_error",
            "prompt is too long: 208310 tokens > 200000 maximum",
        ),
    ],
)
def test_context_overflow_says_to_shorten_the_history(
    provider: str, kind: str, message: str
) -> None:
    error = classify(status_error(provider, "BadRequestError", 400, kind, message), provider)
    assert not error.transient
    assert "too long for the" in error.message and "context window" in error.message


def test_output_limit_too_high_names_the_setting() -> None:
    exc = status_error(
        "anthropic",
        "BadRequestError",
        400,
        "invalid_request_error",
        "max_tokens: 200000 > 64000, which is the maximum allowed number of output tokens",
    )
    assert "ModelSettings.max_tokens" in classify(exc, "anthropic").message


def test_model_error_passes_through_unchanged() -> None:
    original = ModelError("already classified", transient=True, retry_after_s=2)
    assert classify(original) is original


def test_unknown_exception_is_unrecoverable_and_named() -> None:
    error = classify(KeyError("choices"), "openai")
    assert not error.transient
    assert error.message == "openai call failed: KeyError: 'choices'"


def test_classifier_needs_neither_sdk() -> None:
    code = (
        "import sys; sys.modules['openai'] = None; sys.modules['anthropic'] = None\n"
        "from pi_runtime.models.classify import classify_provider_error as c\n"
        "assert c(TimeoutError(), provider='openai').transient\n"
        "assert not c(ValueError('x'), provider='openai').transient\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- a whole run never crashes on a provider error -----------------------------------------


def failing_then_answering(failures: list[BaseException]) -> Callable[[ModelRequest], Any]:
    def answer(request: ModelRequest) -> dict[str, Any]:
        if failures:
            raise classify_provider_error(failures.pop(0), provider="openai")
        return {"text": "done"}

    return answer


def test_run_retries_transient_provider_errors_then_completes() -> None:
    failures: list[BaseException] = [
        status_error(
            "openai", "RateLimitError", 429, "rate_limit_exceeded", "", {"retry-after": "0"}
        ),
        status_error("openai", "InternalServerError", 503, "server_error"),
    ]
    agent = Agent(
        FunctionModel(failing_then_answering(failures)),
        trace_dir=False,
        limits=Limits(retry_base_s=0.0),
    )
    result = asyncio.run(agent.run("hi"))
    assert (result.status, result.stop_reason, result.output) == (
        "completed",
        "final_answer",
        "done",
    )
    failed = [e for e in result.events if e.kind == "model_error"]
    assert [(e.attempt, e.transient) for e in failed] == [(1, True), (2, True)]  # type: ignore[attr-defined]
    assert failed[0].retry_in_ms == 0  # type: ignore[attr-defined]


def test_run_ends_with_model_error_when_transient_errors_persist() -> None:
    failures: list[BaseException] = [
        status_error("openai", "InternalServerError", 502, "server_error") for _ in range(5)
    ]
    agent = Agent(
        FunctionModel(failing_then_answering(failures)),
        trace_dir=False,
        limits=Limits(retry_base_s=0.0, model_retries=2),
    )
    result = asyncio.run(agent.run("hi"))
    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert len(failures) == 2  # 1 call + 2 retries used three of the five
    assert result.error is not None and "HTTP 502" in result.error


def test_run_with_a_rejected_key_fails_at_once_with_the_actionable_message() -> None:
    failures: list[BaseException] = [
        status_error("openai", "AuthenticationError", 401, "invalid_api_key", "Incorrect API key")
    ]
    agent = Agent(FunctionModel(failing_then_answering(failures)), trace_dir=False)
    result = asyncio.run(agent.run("hi"))
    assert (result.status, result.stop_reason) == ("failed", "model_error")
    assert result.error is not None
    assert "OPENAI_API_KEY" in result.error and "Incorrect API key" in result.error
    assert [e.kind for e in result.events].count("model_error") == 1


def test_run_with_exhausted_quota_is_not_retried() -> None:
    failures: list[BaseException] = [
        status_error("openai", "RateLimitError", 429, "insufficient_quota", "quota")
        for _ in range(3)
    ]
    agent = Agent(FunctionModel(failing_then_answering(failures)), trace_dir=False)
    result = asyncio.run(agent.run("hi"))
    assert result.stop_reason == "model_error"
    assert len(failures) == 2
    assert result.error is not None and "quota or credit is used up" in result.error
