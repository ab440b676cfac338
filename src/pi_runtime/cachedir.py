"""Where Pi keeps what it derives once and reuses across processes (the embedded models'
assembled files, the token counter's parsed ranks)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """`$PI_CACHE_DIR`, else `$XDG_CACHE_HOME/pi`, else `~/.cache/pi`."""
    explicit = os.environ.get("PI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pi"
