"""`--tools MODULE:ATTR` to tool specs."""

from __future__ import annotations

import importlib
import os
import sys

from ..exceptions import UserError
from ..tools import ToolSpec


def load_tools(spec: str) -> list[ToolSpec]:
    """The tool or list of tools at `MODULE:ATTR` (the current directory is importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"--tools expects MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or the module raising at import
        raise UserError(
            f"--tools {spec}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise UserError(
            f"--tools {spec}: module {module_name!r} has no attribute {attr!r}"
        ) from None
    if isinstance(value, ToolSpec):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, ToolSpec) for v in value):
        return list(value)
    raise UserError(
        f"--tools {spec}: expected a tool made with @tool or a list of them, got {type(value).__name__}"
    )
