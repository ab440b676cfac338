"""`MODULE:ATTR` references to tool specs (the CLI's `--tools`, a session's recipe)."""

from __future__ import annotations

from pathlib import Path

from ..exceptions import UserError
from ..usercode import import_user_module
from .spec import ToolSpec


def split_ref(ref: str) -> tuple[str, str]:
    """(module, attribute) of a `MODULE:ATTR` reference; anything else is a UserError."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"tools are named MODULE:ATTR, got {ref!r}")
    return module_name, attr


def load_tools(ref: str, import_path: str | Path | None = None) -> list[ToolSpec]:
    """The tool or list of tools at `MODULE:ATTR`.

    Args:
        ref: `MODULE:ATTR`, the attribute holding a tool or a list of tools.
        import_path: a folder to make importable first (e.g. the current directory).
    """
    module_name, attr = split_ref(ref)
    module = import_user_module(module_name, import_path, ref=f"tools {ref}")
    if not hasattr(module, attr):
        raise UserError(f"tools {ref}: module {module_name!r} has no attribute {attr!r}")
    value = getattr(module, attr)
    if isinstance(value, ToolSpec):
        return [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, ToolSpec) for v in value):
        return list(value)
    raise UserError(
        f"tools {ref}: expected a tool made with @tool or a list of them, got {type(value).__name__}"
    )
