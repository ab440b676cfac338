"""What the model reads about a contract: the format instructions and the repair turn.

Both are short on purpose (seed 002 §4.4): the errors with their JSON paths and one rule
fix an answer better than a restated schema, which the model already has.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

ONLY_JSON = "Answer with only the JSON object: no text, no code fence, before or after it."


def repair_text(name: str, errors: Sequence[str]) -> str:
    """The user turn that sends a failed answer back to the model."""
    lines = "\n".join(f"- {e}" for e in errors)
    return (
        f"Your answer does not match the output contract {name!r}:\n{lines}\n"
        f"Fix these and keep everything else. {ONLY_JSON}"
    )


def instructions_text(name: str, schema: dict[str, Any], example: dict[str, Any] | None) -> str:
    """The output-format part of a system prompt, for models without native structured output.

    Deterministic for a given contract, so the system prefix stays byte-identical.
    """
    compact = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    text = (
        f"Final answer: one JSON object matching the output contract {name!r}, "
        f"this JSON Schema:\n{compact}\n{ONLY_JSON}"
    )
    if example is not None:
        shown = json.dumps(example, ensure_ascii=False, separators=(",", ":"))
        text += f"\nExample of a valid answer:\n{shown}"
    return text
