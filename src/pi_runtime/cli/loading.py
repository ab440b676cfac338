"""`--tools MODULE:ATTR` to tool specs, the current directory importable."""

from __future__ import annotations

import os

from ..tools import ToolSpec
from ..tools.loading import load_tools as _load


def load_tools(spec: str) -> list[ToolSpec]:
    """The tool or list of tools at `MODULE:ATTR`, importable from the current directory."""
    return _load(spec, os.getcwd())
