"""Reading the files a user names: agent files, output schemas, scripts, suites, traces.

A path a user gives may name anything. A FIFO blocks a reader until some writer comes; a
device such as /dev/zero never ends, so reading it whole runs out of memory; a symlink loop
makes `Path.resolve()` raise RuntimeError (Python 3.11). Here each of these, and a file
larger than its kind of file should be, is a `UserFileError` naming what the file was for
and its path: nothing but a regular file is opened for reading, opening never blocks, and
no more than `max_bytes + 1` bytes are read.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import BinaryIO

from .exceptions import UserError

MiB = 1024 * 1024

# O_NONBLOCK: opening a FIFO that was swapped in after the check returns at once rather
# than waiting for a writer. O_NOCTTY: a terminal is never made the controlling one.
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UserFileError(UserError, OSError):
    """A file a user named cannot be read as one: missing, not a regular file, too large,
    not UTF-8, or behind a symlink loop.

    It is also an `OSError`, so code that promises an OSError for a file it cannot read
    keeps that promise. `reason` (also `strerror`) is the problem alone, for a caller that
    words its own message.
    """

    def __init__(self, what: str, path: str | Path, reason: str) -> None:
        super().__init__(f"{what} {path}: {reason}")
        self.reason = reason
        self.strerror = reason


def resolved(path: str | Path, *, what: str, base: Path | None = None) -> Path:
    """`path` made absolute: `~` expanded, joined to `base` when relative, links followed."""
    try:
        full = Path(path).expanduser()
        return (full if base is None else base / full).resolve()
    # RuntimeError: a symlink loop, `~user` with no such user; ValueError: a NUL in the path
    except (RuntimeError, OSError, ValueError) as exc:
        raise UserFileError(what, path, f"cannot resolve it: {_said(exc)}") from None


def open_user_file(path: str | Path, *, what: str) -> BinaryIO:
    """The regular file at `path`, open to read bytes; anything else is refused unopened."""
    try:
        _require_regular(os.stat(path), what, path)  # before opening: opening acts on a device
        fd = os.open(path, _READ_FLAGS)
    except UserFileError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise UserFileError(what, path, _said(exc)) from None
    file = os.fdopen(fd, "rb")
    try:
        _require_regular(os.fstat(fd), what, path)  # the path may name another file by now
    except BaseException:
        file.close()
        raise
    return file


def read_user_text(path: str | Path, *, what: str, max_bytes: int) -> str:
    """The UTF-8 text of the regular file at `path`, a leading byte order mark dropped
    (editors on Windows write one); refused when it holds more than `max_bytes` bytes."""
    with open_user_file(path, what=what) as file:
        try:
            data = file.read(max_bytes + 1)
        except OSError as exc:
            raise UserFileError(what, path, _said(exc)) from None
    if len(data) > max_bytes:
        raise UserFileError(what, path, f"larger than {_size(max_bytes)}")
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + len(data) - len(body)
        raise UserFileError(what, path, f"not UTF-8 ({exc.reason} at byte {at})") from None


def _require_regular(status: os.stat_result, what: str, path: str | Path) -> None:
    if stat.S_ISREG(status.st_mode):
        return
    kind = next((name for test, name in _KINDS if test(status.st_mode)), "another kind of file")
    raise UserFileError(what, path, f"not a regular file but {kind}")


def _said(exc: BaseException) -> str:
    """What an OSError says without repeating the path (the message names it already)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _size(count: int) -> str:
    return f"{count // MiB} MiB" if count % MiB == 0 else f"{count} bytes"
