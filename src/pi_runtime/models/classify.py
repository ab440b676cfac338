"""Provider failures to `ModelError`: transient ones are retried, the rest end the run.

Works on the exceptions of the `openai` and `anthropic` SDKs, of `httpx`/`httpx2`, and on
plain `TimeoutError`/`ConnectionError`, without importing any SDK: the SDKs share their
shape (`status_code`, `response.headers`, `body`) and their class names, so the classifier
reads those. It keeps working when an SDK is absent or changes its import path.

| failure                                   | transient | what the message says          |
|-------------------------------------------|-----------|--------------------------------|
| 429 rate limit, 408/409, 5xx, 529, timeout, connection | yes | provider, status, retry hint |
| 401/403                                   | no        | which key variable to check    |
| 402, 429 `insufficient_quota`, billing    | no        | the account's plan or credit   |
| 400/404/413/422, context too long         | no        | which setting to change        |
| a stream event that is not JSON           | no        | that the answer is malformed   |

Provider bodies and exception strings echo keys and credentialed URLs back: every message
is redacted (`messages.redact`) before it leaves, and before it is cut to length, so a key
is never left half-shown.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

from ..exceptions import ModelError
from ..messages import redact
from ._malformed import malformed, one_line

__all__ = ["API_KEY_VARIABLES", "classify_provider_error", "retry_after_seconds"]

API_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
"""The environment variable each hosted provider's key is read from."""

_HTTP_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2")
_SDK_MODULES = ("openai", "anthropic", *_HTTP_MODULES)
_TIMEOUT_CLASSES = {"APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout"}
_CONNECTION_CLASSES = {"APIConnectionError", "TransportError", "NetworkError", "ProtocolError"}
_QUOTA_CODES = {"insufficient_quota", "billing_error", "billing_hard_limit_reached"}
_CONTEXT_CODES = {"context_length_exceeded", "string_above_max_length", "request_too_large"}
_STATUS_OF_CODE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_CONTEXT_WORDS = (
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def classify_provider_error(exc: BaseException, *, provider: str) -> ModelError:
    """The `ModelError` a failed call to `provider` should end in.

    Callers raise it `from exc`, so the original stays in the traceback. Its message
    holds no API key or URL credentials.
    """
    error = _classify(exc, provider)
    message = redact(error.message)
    if message is error.message:
        return error
    return ModelError(message, transient=error.transient, retry_after_s=error.retry_after_s)


def _classify(exc: BaseException, provider: str) -> ModelError:
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, json.JSONDecodeError):  # the SDK reading an event of the stream
        return malformed(provider, f"an event of its stream is not JSON ({exc.msg})")
    status = _status_code(exc)
    if status is None or status < 400:
        # an error event inside a 200 stream carries only its type
        code = _error_code(exc, getattr(exc, "body", None)) or ""
        status = (
            int(code) if code.isdigit() and len(code) == 3 else _STATUS_OF_CODE.get(code, status)
        )
    if status is not None and status >= 400:
        return _from_status(exc, status, provider)
    names = _sdk_class_names(exc)
    if names & _TIMEOUT_CLASSES or isinstance(exc, TimeoutError):
        return ModelError(
            f"{provider} did not answer in time (timeout)",
            transient=True,
        )
    if names & _CONNECTION_CLASSES or isinstance(exc, ConnectionError):
        detail = one_line(str(exc)) or type(exc).__name__
        return ModelError(
            f"could not reach {provider} ({detail}); check the network or the base URL",
            transient=True,
        )
    detail = one_line(str(exc))
    return ModelError(
        f"{provider} call failed: {type(exc).__name__}" + (f": {detail}" if detail else "")
    )


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """The wait a response asks for: `retry-after-ms`, else `Retry-After` (seconds or a date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = _number(lowered.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000)
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT even when it fails to say so
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _from_status(exc: BaseException, status: int, provider: str) -> ModelError:
    body = getattr(exc, "body", None)
    code = _error_code(exc, body)
    detail = _detail(exc, body)
    named = f", {code}" if code and code != str(status) else ""
    said = f" (HTTP {status}{named})" + (f": {detail}" if detail else "")
    key = API_KEY_VARIABLES.get(provider)
    key_name = key or f"the API key configured for {provider}"
    text = f"{code or ''} {detail}".lower()

    quota_words = status < 500 and ("quota" in text or "credit balance" in text)
    if status == 402 or (code or "") in _QUOTA_CODES or quota_words:
        return ModelError(
            f"{provider} refused the call: the account's quota or credit is used up{said}. "
            f"Add credit or raise the limit in the {provider} console, or use another model."
        )
    if status == 429:
        after = retry_after_seconds(_headers(exc))
        return ModelError(f"{provider} rate limit{said}", transient=True, retry_after_s=after)
    if status in (408, 409) or status >= 500:
        kind = "is overloaded" if status == 529 or code == "overloaded_error" else "server error"
        return ModelError(
            f"{provider} {kind}{said}",
            transient=True,
            retry_after_s=retry_after_seconds(_headers(exc)),
        )
    if status == 401:
        return ModelError(
            f"{provider} rejected the API key{said}. Check {key_name}: is it set, current, and a key for {provider}?"
        )
    if status == 403:
        return ModelError(
            f"{provider} denied access{said}. The key lacks permission for this model or "
            f"region: check {key_name}, or pick another model with --model."
        )
    if status == 413 or (code or "") in _CONTEXT_CODES or any(w in text for w in _CONTEXT_WORDS):
        return ModelError(
            f"the conversation is too long for the {provider} model's context window{said}. "
            "Shorten the history or tool results, lower max_tokens, or use a larger model."
        )
    if status == 404:
        return ModelError(
            f"{provider} does not know this model or endpoint{said}. Check the model name in "
            "--model (e.g. anthropic:claude-sonnet-4-6) and, for custom servers, --base-url."
        )
    if "max_tokens" in text:
        return ModelError(
            f"{provider} rejected the output limit{said}. Lower ModelSettings.max_tokens "
            "to what the model allows."
        )
    return ModelError(
        f"{provider} rejected the request{said}. This is not retried: fix the request "
        "(model name, tool schemas, settings) and run again."
    )


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)  # httpx.HTTPStatusError carries only this
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers if isinstance(headers, Mapping) else None


def _sdk_class_names(exc: BaseException) -> set[str]:
    return {
        cls.__name__
        for cls in type(exc).__mro__
        if cls.__module__.partition(".")[0] in _SDK_MODULES
    }


def _error_object(body: object) -> Mapping[str, Any]:
    """The error object of a body: Anthropic nests it under `error`, OpenAI's SDK unwraps it."""
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, Mapping) else body


def _error_code(exc: BaseException, body: object) -> str | None:
    error = _error_object(body)
    details = error.get("details")
    for value in (
        getattr(exc, "code", None),
        getattr(exc, "error_code", None),
        details.get("error_code") if isinstance(details, Mapping) else None,
        error.get("code"),
        error.get("type"),
    ):
        if isinstance(value, str) and value and value != "error":
            return value
    return None


def _detail(exc: BaseException, body: object) -> str:
    message = _error_object(body).get("message")
    if isinstance(message, str) and message:
        return one_line(message)
    message = getattr(exc, "message", None) or str(exc)
    return one_line(str(message))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None
