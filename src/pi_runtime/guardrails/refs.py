"""`MODULE:ATTR` references to callables: an agent file's guardrails and escalate hook."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from ..exceptions import UserError


def check_ref(ref: Any) -> str:
    """`ref` if it spells `MODULE:ATTR`, else a UserError."""
    if not isinstance(ref, str):
        raise UserError(f"expected MODULE:ATTR, got {ref!r}")
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name.strip() or not attr.strip() or ":" in attr:
        raise UserError(f"expected MODULE:ATTR, got {ref!r}")
    return ref


def load_callable(ref: str, import_path: str | Path | None = None) -> Any:
    """The callable at `MODULE:ATTR` (attributes may be dotted: `mod:Class.method`).

    Args:
        import_path: a folder to make importable first (an agent file's folder).
    """
    module_name, _, attr = check_ref(ref).partition(":")
    folder = str(import_path) if import_path is not None else None
    if folder and Path(folder).is_dir() and folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or the module raising at import
        raise UserError(
            f"{ref}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        if not hasattr(value, part):
            raise UserError(f"{ref}: {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not callable(value):
        raise UserError(f"{ref}: expected a callable, got {type(value).__name__}")
    return value
