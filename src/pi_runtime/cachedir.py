"""Where Pi keeps what it derives once and reuses across processes (the embedded models'
assembled files, the token counter's parsed ranks)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["cache_dir", "replacing"]


def cache_dir() -> Path:
    """`$PI_CACHE_DIR`, else `$XDG_CACHE_HOME/pi`, else `~/.cache/pi`."""
    explicit = os.environ.get("PI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pi"


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[BinaryIO]:
    """A file to write `target` whole, written under a temporary name beside it.

    When the block ends without an error, the file is synced, made readable by all (a
    cache may be shared; mkstemp gives 0600) and renamed into place, so a reader never
    sees a half-written file; when it raises, nothing is left behind. Raises OSError.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    temp = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
