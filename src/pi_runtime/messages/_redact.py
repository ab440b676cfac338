"""Secrets out of outside text: API keys and URL credentials before text enters an error,
a model name, a trace or a store.

Provider error bodies echo the key they were sent, proxies echo the URL they were reached
at, and client libraries put both into exception messages. `redact` removes

- the values of secret-looking environment variables (`OPENAI_API_KEY`, `*_TOKEN`,
  `*SECRET*`, …), read at call time, and keys given in code (`keep_secret`: a model
  given its key as an argument);
- well-known key shapes: `sk-…` and `sk-ant-…` keys, `Bearer`/`Basic` credentials;
- the user info and the `key`/`token`/… query values of URLs in the text (`redact_url`).

Text with nothing to redact comes back as the same object, cheaply: loops pass many
strings through here. Every pattern runs in time linear in the text: callers redact whole
provider error bodies (a hostile server picks them) before they clip them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["REDACTED", "keep_secret", "redact", "redact_url", "secret_values"]

REDACTED = "[redacted]"

MIN_SECRET_LENGTH = 8
"""Shorter environment values are not treated as secrets: they would match everywhere."""

_SECRET_NAME = re.compile(r"_KEY$|_TOKEN$|SECRET|PASSWORD", re.IGNORECASE)
_KEY_PREFIXES = ("sk-ant-", "sk-")
_SHAPES = re.compile(
    r"(?<![\w-])(?P<prefix>sk-ant-|sk-)[A-Za-z0-9_-]{16,}"
    r"|\b(?P<scheme>(?i:bearer|basic))[ \t]+(?P<token>[A-Za-z0-9._~+/-]{8,}=*)"
)
_SHAPE_WORDS = ("sk-", "earer", "EARER", "asic", "ASIC")
# A URL is `\b[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>`]+`, but `re` tried that from every word
# start of a long scheme-like run ("a-a-a-…" and no "://"): quadratic, 1.4 s for 64 KB.
# So the whole run before a "://" is found once (it cannot start inside another run), and
# the scheme's start is looked for inside it; the same URLs as before, in linear time.
_URL_RUN = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z0-9+.-]+://")
_SCHEME_START = re.compile(r"\b[A-Za-z]")
_URL_REST = re.compile(r"[^\s\"'<>`]+")
_URL_PARTS = re.compile(
    r"(?P<head>[^:/?#]+://)(?P<netloc>[^/?#]*)(?P<path>[^?#]*)(?P<tail>.*)", re.DOTALL
)
_PARAM = re.compile(r"(?P<lead>[?&;#])(?P<name>[^&;=?#\s\"'<>`]+)=(?P<value>[^&;#\s\"'<>`]*)")
_SECRET_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "sig",
        "signature",
    }
)
_SECRET_PARAM_SUFFIXES = ("_key", "_token", "_secret", "_password")

_cache: tuple[object, tuple[str, ...]] = (None, ())
"""The environment's raw items and the kept keys when last read, and the secret values."""
_kept: frozenset[str] = frozenset()
"""Keys given in code (`keep_secret`)."""


MIN_KEPT_LENGTH = 16
"""Shorter keys given in code are placeholders (`api_key="lm-studio"` for a local
server), not secrets: redacting them would hide the server's name in every message."""


def keep_secret(value: str | None) -> None:
    """Redact `value` from now on, wherever this process writes text: a key given in
    code, which no environment variable names (a gateway's key given to a model)."""
    global _kept
    if value is not None and len(value.strip()) >= MIN_KEPT_LENGTH:
        _kept = _kept | {value.strip()}  # one assignment: threads see one set or the other


def redact(text: str) -> str:
    """`text` without API keys or URL credentials; the same object when it holds none."""
    out = text
    for value in secret_values():
        if value in out:
            out = out.replace(value, _masked(value))
    if _may_hold_a_shape(out):
        out = _SHAPES.sub(_mask_shape, out)
    if "://" in out:
        out = _redact_urls(out)
    if "=" in out:  # queries of relative URLs too: `/v1?api_key=…` as a server echoes it
        out = _PARAM.sub(_mask_param, out)
    return text if out == text else out


def redact_url(url: str) -> str:
    """`url` with its user info as `***@` and secret query values as `[redacted]`.

    The rest stays byte for byte, so the URL still says where it points.
    """
    parts = _URL_PARTS.fullmatch(url)
    if parts is None:
        return url
    netloc = parts["netloc"]
    user, at, host = netloc.rpartition("@")
    if at and user:
        netloc = "***@" + host
    tail = parts["tail"]  # the query and the fragment (OAuth puts tokens there)
    if "=" in tail:
        tail = _PARAM.sub(_mask_param, tail)
    out = parts["head"] + netloc + parts["path"] + tail
    return url if out == url else out


def _redact_urls(text: str) -> str:
    pieces: list[str] = []
    done = 0  # text before `done` is in `pieces`
    at = 0
    while (run := _URL_RUN.search(text, at)) is not None:
        at = run.end()
        start = _SCHEME_START.search(text, run.start(), at - 3)
        if start is None:
            continue  # no scheme before this "://" (`1://`, `_://`): scan no further
        rest = _URL_REST.match(text, at)
        if rest is None:
            continue
        pieces += (text[done : start.start()], redact_url(text[start.start() : rest.end()]))
        done = at = rest.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def secret_values() -> tuple[str, ...]:
    """The values of secret-looking environment variables and kept keys now, longest
    first."""
    global _cache
    # Comparing a tuple of the environment's raw items is a C-level check of a few
    # microseconds; decoding and matching every name on each call would not be.
    raw = getattr(os.environ, "_data", None)
    snapshot = (
        tuple(raw.items()) if isinstance(raw, dict) else tuple(os.environ.items()),
        _kept,
    )
    seen, values = _cache
    if snapshot != seen:
        values = _secrets_of(os.environ, snapshot[1])
        _cache = (snapshot, values)  # one assignment: threads never see half an update
    return values


def _secrets_of(environ: Mapping[str, str], kept: frozenset[str]) -> tuple[str, ...]:
    found = {
        value.strip()
        for name, value in environ.items()
        if _SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET_LENGTH
    } | kept
    return tuple(sorted(found, key=len, reverse=True))


def _may_hold_a_shape(text: str) -> bool:
    # substring tests are an order of magnitude faster than the regex on harmless text
    return any(word in text for word in _SHAPE_WORDS)


def _masked(value: str) -> str:
    for prefix in _KEY_PREFIXES:
        if value.startswith(prefix):
            return f"{prefix}…{REDACTED}"
    return REDACTED


def _mask_shape(match: re.Match[str]) -> str:
    if match["prefix"]:
        return f"{match['prefix']}…{REDACTED}"
    token = match["token"]
    if token[1:].isalpha() and token[1:].islower():
        return match.group(0)  # prose ("basic arithmetic"), not a credential
    return f"{match['scheme']} {REDACTED}"


def _mask_param(match: re.Match[str]) -> str:
    name = match["name"]
    lowered = name.lower().replace("-", "_")
    if lowered not in _SECRET_PARAMS and not lowered.endswith(_SECRET_PARAM_SUFFIXES):
        return match.group(0)
    if not match["value"]:
        return match.group(0)
    return f"{match['lead']}{name}={REDACTED}"
