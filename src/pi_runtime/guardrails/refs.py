"""`MODULE:ATTR` references to callables: an agent file's guardrails and escalate hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..usercode import import_user_module


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
    value: Any = import_user_module(module_name, import_path, ref=ref)
    for part in attr.split("."):
        if not hasattr(value, part):
            raise UserError(f"{ref}: {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not callable(value):
        raise UserError(f"{ref}: expected a callable, got {type(value).__name__}")
    return value
