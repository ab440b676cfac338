"""`redact` and `redact_url`: what counts as a secret, what is kept, and that harmless
text passes untouched."""

from __future__ import annotations

import pytest

from pi_runtime.messages import keep_secret, redact, redact_url

KEY = "sk-proj-Zx81aQ0pLm2NvB7c"


@pytest.fixture(autouse=True)
def no_secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.endswith(("_KEY", "_TOKEN")) or "SECRET" in name or "PASSWORD" in name:
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "the weather in Beijing is sunny, 23°C",
        "see https://example.com/docs?page=2#top for more",
        "a basic arithmetic mistake; the bearer of bad news",
        "risk-assessment-framework and task-0123456789abcdefgh",
        "http://127.0.0.1:8080/v1",
    ],
)
def test_harmless_text_comes_back_as_the_same_object(text: str) -> None:
    assert redact(text) is text


def test_an_environment_key_is_redacted_every_time_it_appears(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    said = redact(f"key {KEY} rejected; you sent {KEY}")

    assert said == "key sk-…[redacted] rejected; you sent sk-…[redacted]"


@pytest.mark.parametrize(
    "name", ["DEEPSEEK_API_KEY", "MY_SERVICE_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "APP_SECRET_X"]
)
def test_any_secret_looking_variable_is_redacted_whatever_its_shape(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "hunter2-but-longer")

    assert redact("login with hunter2-but-longer failed") == "login with [redacted] failed"


def test_short_values_and_other_variables_are_not_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SHORT_KEY", "abc")
    monkeypatch.setenv("EDITOR_PATH", "/usr/bin/vim-longer")
    text = "abc and /usr/bin/vim-longer"

    assert redact(text) is text


def test_the_environment_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "token: 7f3c2a9e1d4b"
    assert redact(text) is text

    monkeypatch.setenv("SERVICE_TOKEN", "7f3c2a9e1d4b")
    assert redact(text) == "token: [redacted]"

    monkeypatch.setenv("SERVICE_TOKEN", "something-else")
    assert redact(text) is text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Incorrect API key provided: {KEY}.", "Incorrect API key provided: sk-…[redacted]."),
        (
            "invalid x-api-key sk-ant-api03-AbCdEf0123456789xyz",
            "invalid x-api-key sk-ant-…[redacted]",
        ),
        ("Authorization: Bearer eyJhbGciOi.J9abc", "Authorization: Bearer [redacted]"),
        ("authorization=Basic dXNlcjpwYXNz", "authorization=Basic [redacted]"),
    ],
)
def test_well_known_key_shapes_keep_only_their_prefix(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pass@host:8080/v1", "http://***@host:8080/v1"),
        ("https://token@host/v1", "https://***@host/v1"),
        (
            "http://h/v1?api_key=abc&model=x&token=t#access_token=z",
            "http://h/v1?api_key=[redacted]&model=x&token=[redacted]#access_token=[redacted]",
        ),
        (
            "https://h/s?sig=AbC%2F&X-Api-Key=k&page=2&key=",
            "https://h/s?sig=[redacted]&X-Api-Key=[redacted]&page=2&key=",
        ),
        ("http://h/key=inpath/v1", "http://h/key=inpath/v1"),
    ],
)
def test_urls_lose_user_info_and_secret_query_values(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_a_url_without_credentials_is_the_same_object() -> None:
    url = "https://api.deepseek.com/v1?model=deepseek-chat"

    assert redact_url(url) is url


def test_urls_inside_free_text_are_redacted() -> None:
    text = "cannot reach http://me:pw@10.0.0.1/v1?key=abc (refused); retry http://me:pw@h2"

    assert redact(text) == (
        "cannot reach http://***@10.0.0.1/v1?key=[redacted] (refused); retry http://***@h2"
    )


def test_redaction_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    once = redact(f"{KEY} at http://u:p@h/?token=x with Bearer abcdef123456")

    assert redact(once) is once


def test_secret_query_values_of_relative_urls_are_redacted() -> None:
    text = "404 for POST /v1/?api_key=abc123&model=m#token=t (path /a=b kept)"

    assert redact(text) == (
        "404 for POST /v1/?api_key=[redacted]&model=m#token=[redacted] (path /a=b kept)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a" * 5000 + "://me:pw@h/v1", "a" * 5000 + "://***@h/v1"),
        ("x-" * 5000 + "y://me:pw@h?key=k", "x-" * 5000 + "y://***@h?key=[redacted]"),
        ("git+ssh.v2://me:pw@h", "git+ssh.v2://***@h"),
        ("_a://me:pw@h", "_a://me:pw@h"),  # no word start, no scheme: as ever, not a URL
        ("1-http://me:pw@h", "1-http://***@h"),
        (
            f"http://me:pw@{'h' * 50_000}.io/?token=t",
            f"http://***@{'h' * 50_000}.io/?token=[redacted]",
        ),
    ],
)
def test_credentialed_urls_with_long_schemes_and_hosts_are_redacted(
    text: str, expected: str
) -> None:
    assert redact(text) == expected


def test_a_hostile_error_body_is_redacted_in_linear_time() -> None:
    # `re` tried the URL pattern from every word start of "a-a-a-…": 1.4 s for 64 KB, each
    # doubling of the text four times longer; these 4 MB would take hours. (A provider's
    # error body is redacted whole, before it is clipped, on the server's event loop.)
    hostile = "a-" * 2_000_000
    assert redact(hostile + " see https://me:pw@h/?key=k") == (
        hostile + " see https://***@h/?key=[redacted]"
    )
    many = "1://" * 1_000_000  # a "://" with no scheme, again and again
    assert redact(many) is many


def test_a_kept_key_across_an_error_messages_cut_is_never_half_shown() -> None:
    # Messages are redacted whole, then cut: cut first, the key's head (no longer the
    # key) was shown. A tool validator's refusal, and a stdio MCP server's bad line.
    from mcp.types import JSONRPCMessage
    from pydantic import TypeAdapter, ValidationError

    from pi_runtime.mcp.malformed import HEAD_CHARS, account
    from pi_runtime.tools.arguments import rejection

    key = "gw-" + "Q7x9Lm2Vp4Rt8Ks1Zb6Nc3Hd5Wf0Yj2" * 2
    keep_secret(key)
    refused = rejection(ValueError("v" * 240 + key))  # the cut falls inside the key
    assert key[:8] not in refused and "v" * 200 in refused
    line = '{"jsonrpc": "2.0", "note": "' + "n" * (HEAD_CHARS - 40) + "\x1b" + key + '"}'
    with pytest.raises(ValidationError) as caught:
        TypeAdapter(JSONRPCMessage).validate_json(line)
    told = account(caught.value)
    assert key[:8] not in told and "\\x1b" in told and "\x1b" not in told
