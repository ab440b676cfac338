"""Stdout of a `--json` command: the one JSON object, and nothing else.

Tools modules print when imported, tools print, write to file descriptor 1 or run child
processes that inherit it. `contextlib.redirect_stdout` only swaps `sys.stdout`, so for
the whole command file descriptor 1 is pointed at stderr, and the result is written to a
copy of the real stdout kept aside. Where `sys.stdout` is not file descriptor 1 (typer's
test runner captures into a buffer), only `sys.stdout` is swapped, and the result goes to
the stream that was `sys.stdout`.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

import typer

Emit = Callable[[str], None]
"""Writes the command's result text, a line, to its stdout."""


@contextlib.contextmanager
def json_stdout(enabled: bool) -> Iterator[Emit]:
    """While open, with `enabled`, anything written to stdout goes to stderr; the `Emit`
    it gives writes to the real stdout. Without `enabled` it changes nothing."""
    if not enabled:
        yield typer.echo
        return
    real = sys.stdout
    kept = _kept_stdout()
    if kept is None:
        with contextlib.redirect_stdout(sys.stderr):
            yield lambda text: typer.echo(text, file=real)
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield lambda text: _write(kept, text, like=real)
    finally:
        _restore(kept)


def _kept_stdout() -> int | None:
    """A copy of file descriptor 1, once it is pointed at stderr; None where `sys.stdout`
    is not file descriptor 1 or it cannot be moved (then nothing changed)."""
    try:
        if sys.stdout.fileno() != 1:
            return None
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None
    sys.stdout.flush()
    kept = os.dup(1)
    try:
        os.dup2(sys.stderr.fileno(), 1)
    except (AttributeError, ValueError, OSError):
        os.close(kept)
        return None
    return kept


def _write(fd: int, text: str, *, like: TextIO) -> None:
    """`text` and a line break to descriptor `fd`, encoded as stream `like` encodes."""
    with open(fd, "w", encoding=like.encoding, errors=like.errors, closefd=False) as stream:
        stream.write(text + "\n")


def _restore(kept: int) -> None:
    """Point file descriptor 1 back at the real stdout, after what is buffered for it
    has gone to stderr."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    os.dup2(kept, 1)
    os.close(kept)
