"""`MODULE:ATTR` references to tool specs (the CLI's `--tools`, a session's recipe)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from ..exceptions import UserError
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
    folder = str(import_path) if import_path is not None else None
    if folder and Path(folder).is_dir() and folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or the module raising at import
        raise UserError(
            f"tools {ref}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if folder:
        _check_origin(module, module_name, Path(folder))
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


def _check_origin(module: object, module_name: str, folder: Path) -> None:
    """Refuse a module that `folder` holds but that was imported earlier from elsewhere
    (two agents' `tools.py` in one worker): its tools would silently be the other's."""
    relative = Path(*module_name.split("."))
    candidates = [folder / relative.with_suffix(".py"), folder / relative / "__init__.py"]
    here = next((c.resolve() for c in candidates if c.is_file()), None)
    loaded = getattr(module, "__file__", None)
    if here is None or loaded is None or Path(loaded).resolve() == here:
        return
    raise UserError(
        f"tools {module_name}: a module of that name was already imported from {loaded}, "
        f"not {here}; give tool modules of different agents different names"
    )
