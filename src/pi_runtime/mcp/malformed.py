"""Lines a stdio server writes that are no JSON-RPC message, and what Pi does with them.

The SDK reads a stdio server's stdout a line at a time. A line it cannot read (not JSON,
JSON with half a UTF-16 surrogate pair, JSON of no JSON-RPC shape) it logs and hands to
the session's `message_handler` as an exception; the request that line may have answered
would wait for its whole time limit. Which request it was cannot be known, so every
request waiting on that session fails at once (`Malformed`), each with the same account
of the line: one line, the server's text escaped and clipped.

The session is kept: one stray line (a `print` to stdout) is a bug, not a dead server.
A session that sends `MAX_MALFORMED` such lines is treated as broken: it is closed (a
stdio server is stopped) and the next call starts the server again, so a server that
keeps writing garbage holds no call and fills no log for long.

Over Streamable HTTP the SDK itself fails the request a body it cannot read belongs to.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..messages import clipped, redact, repair_text

log = logging.getLogger("pi_runtime.mcp")

MAX_MALFORMED = 3
"""Lines that are no JSON-RPC message a session may send before it is treated as broken."""
MAX_ACCOUNT_CHARS = 300
HEAD_CHARS = 120
SDK_LOGGER = "mcp.client.stdio"
SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"


class Malformed(Exception):
    """The server sent a line that is no JSON-RPC message while a request waited."""


class Watch:
    """The malformed lines of one session, and the requests they fail.

    Args:
        where: the server as messages name it.
        broken: called once, at the session's `MAX_MALFORMED`th malformed line.
    """

    def __init__(self, where: str, broken: Callable[[], None]) -> None:
        self.where = where
        self.seen = 0
        self._broken = broken
        self._waiting: set[asyncio.Future[str]] = set()

    def waiter(self) -> asyncio.Future[str]:
        """A future that gets the account of the next malformed line; `release` it."""
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.add(waiter)
        return waiter

    def release(self, waiter: asyncio.Future[str]) -> None:
        self._waiting.discard(waiter)

    async def handle(self, message: Any) -> None:
        """The SDK session's `message_handler`: notifications pass, exceptions count."""
        if not isinstance(message, Exception) or self.seen >= MAX_MALFORMED:
            return
        self.seen += 1
        why = account(message)
        waiting, self._waiting = self._waiting, set()
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(why)
        if self.seen == 1:
            log.warning("%s sent a malformed message: %s", self.where, why)
        if self.seen == MAX_MALFORMED:
            log.warning(
                "%s sent %d malformed messages: the session is ended", self.where, self.seen
            )
            self._broken()


def account(exc: BaseException) -> str:
    """What was wrong with a line and how it began, on one line, escaped and clipped."""
    if isinstance(exc, ValidationError) and exc.error_count():
        errors = exc.errors(include_url=False)
        # one error per kind of message when the JSON is fine but fits none of them
        what = errors[0]["msg"] if len(errors) == 1 else "no JSON-RPC message"
        line = errors[0]["input"]
        if not isinstance(line, str):
            line = json.dumps(line, ensure_ascii=False, default=str)
        # redacted whole, before the cut and the escapes: a key is never half-shown
        line = redact(repair_text(line))
        head = escaped(line[:HEAD_CHARS]) + ("…" if len(line) > HEAD_CHARS else "")
        text = f"{escaped(redact(what))}; it began: {head}"
    else:
        text = escaped(redact(repair_text(f"{type(exc).__name__}: {exc}")))
    return clipped(text, MAX_ACCOUNT_CHARS)


def escaped(text: str) -> str:
    """`text` on one inert line: what is not printable (controls, line breaks, bidi marks,
    lone surrogates) as its Python escape, such as `\\n` or `\\x1b` (as `pi` prints)."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


class _OneLine(logging.Filter):
    """The SDK's record of a line it could not parse, as one line without its traceback:
    Pi fails the requests waiting on the session and logs which server sent it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == SDK_PARSE_FAILURE and record.exc_info and record.exc_info[1]:
            record.msg, record.args = "%s: %s", (SDK_PARSE_FAILURE, account(record.exc_info[1]))
            record.exc_info = record.exc_text = None
        return True


def quiet_sdk_parse_log() -> None:
    """Keep the SDK's record of each unparsable line to one line (once per process)."""
    sdk = logging.getLogger(SDK_LOGGER)
    if not any(isinstance(f, _OneLine) for f in sdk.filters):
        sdk.addFilter(_OneLine())
