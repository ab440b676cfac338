"""Importing a user's module named by a `MODULE:ATTR` reference (tools, guardrails, hooks).

Importing runs the module's code. Whatever it raises at import, `sys.exit()` included,
becomes a UserError naming the module, so a CLI says why and a worker or server goes on
rather than exiting. A module that an agent's folder holds but that was imported earlier
from elsewhere (two agents' `tools.py` in one worker) is refused: its attributes would
silently be the other agent's.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from .exceptions import UserError


def import_user_module(module_name: str, folder: str | Path | None, *, ref: str) -> ModuleType:
    """The module `module_name`, `folder` made importable first; errors start with `ref`."""
    where = str(folder) if folder is not None else None
    if where and Path(where).is_dir() and where not in sys.path:
        sys.path.insert(0, where)
    try:
        module = importlib.import_module(module_name)
    except SystemExit as exc:  # the module's own `sys.exit()`: not Pi's to exit on
        code = exc.code if type(exc.code) is int else 1
        raise UserError(f"{ref}: importing {module_name!r} called sys.exit({code})") from None
    except Exception as exc:  # ImportError, SyntaxError, or the module raising at import
        raise UserError(f"{ref}: cannot import {module_name!r}: {_said(exc)}") from exc
    if where:
        _check_origin(module, module_name, Path(where), ref)
    return module


def _said(exc: BaseException) -> str:
    """`Type: message`, or the type alone when the message cannot be had."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # a user's `__str__` that raises
        return type(exc).__name__


def _check_origin(module: ModuleType, module_name: str, folder: Path, ref: str) -> None:
    relative = Path(*module_name.split("."))
    candidates = [folder / relative.with_suffix(".py"), folder / relative / "__init__.py"]
    here = next((c.resolve() for c in candidates if c.is_file()), None)
    loaded = getattr(module, "__file__", None)
    if here is None or loaded is None or Path(loaded).resolve() == here:
        return
    raise UserError(
        f"{ref}: a module named {module_name!r} was already imported from {loaded}, "
        f"not {here}; give the modules of different agents different names"
    )
