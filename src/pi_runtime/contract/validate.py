"""Reading a final answer as JSON and checking it; every error names a JSON path (`$.a[0]`).

The answer must be one JSON object, alone. A single Markdown code fence around it
(```` ```json ... ``` ````) and surrounding whitespace are tolerated, since models add them
even when told not to and removing them loses nothing; any other text is an error the
model is asked to fix, because a caller that forwards the answer would forward it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from ..messages import MAX_ARGUMENT_DEPTH, depth_within

MAX_ERRORS = 20
"""Errors reported per check: enough to fix an answer, few enough to fit a repair turn."""

MAX_ERROR_CHARS = 300
"""Longest error line: validators quote the offending value, which may be huge."""

# ```json or a bare ```; another language tag (```python) is not a JSON fence
_FENCE = re.compile(r"\A```(?:json)?(?![A-Za-z0-9_])\s*(.*?)\s*```\Z", re.DOTALL | re.IGNORECASE)
_IDENTIFIER = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def json_path(parts: Iterable[str | int]) -> str:
    """`$.fulfillment.errors[0]`; keys that are not identifiers are quoted: `$["a b"]`."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _shorten(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = (limit - 5) // 2
    return f"{text[:keep]} ... {text[-keep:]}"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            # readers disagree on which duplicate wins: the answer would mean two things
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_unique_keys)


def parse_answer(text: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """(the JSON object the answer is, ()) or (None, why it is not one)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        return None, ("$: the answer is empty; expected a JSON object",)
    try:
        value, end = _DECODER.raw_decode(body)
    except RecursionError:
        return None, (f"$: the answer is nested deeper than {MAX_ARGUMENT_DEPTH} levels",)
    except ValueError as exc:
        start = body.find("{")
        if start > 0 and _decodes_at(body, start):
            return None, (
                f"$: text before the JSON object: {_shorten(repr(body[:start].strip()), 80)}",
            )
        return None, (f"$: the answer is not valid JSON: {_shorten(str(exc))}",)
    if end < len(body):
        return None, (f"$: text after the JSON object: {_shorten(repr(body[end:].strip()), 80)}",)
    if not isinstance(value, dict):
        return None, (f"$: expected a JSON object, got {_json_type(value)}",)
    if not depth_within(value, MAX_ARGUMENT_DEPTH):
        return None, (f"$: the answer is nested deeper than {MAX_ARGUMENT_DEPTH} levels",)
    try:
        # an escaped lone surrogate is valid JSON but text no UTF-8 writer can emit
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return None, ("$: the answer holds an unpaired UTF-16 surrogate (e.g. \\ud800)",)
    return value, ()


def _decodes_at(body: str, start: int) -> bool:
    try:
        _DECODER.raw_decode(body, start)
    except (ValueError, RecursionError):
        return False
    return True


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _capped(errors: list[str]) -> tuple[str, ...]:
    if len(errors) <= MAX_ERRORS:
        return tuple(errors)
    return (*errors[:MAX_ERRORS], f"... and {len(errors) - MAX_ERRORS} more errors")


def schema_errors(validator: Draft202012Validator, value: Any) -> tuple[str, ...]:
    """Every way `value` breaks the schema, sorted by where in the answer.

    A missing or unexpected property is reported at its own path (`$.a.b: ...`), not at
    the object holding it: the model fixes what it is pointed at.
    """
    found: dict[str, None] = {}
    for error in validator.iter_errors(value):
        at = list(error.absolute_path)
        instance, rule = error.instance, error.validator
        if rule == "required" and isinstance(instance, dict):
            for name in error.validator_value:
                if name not in instance:
                    found[f"{json_path([*at, name])}: missing (the contract requires it)"] = None
        elif (
            rule == "additionalProperties"
            and error.validator_value is False
            and isinstance(instance, dict)
            and "patternProperties" not in error.schema
        ):
            known = error.schema.get("properties", {})
            for name in instance:
                if name not in known:
                    found[
                        f"{json_path([*at, name])}: not allowed (the contract has no such property)"
                    ] = None
        else:
            found[f"{json_path(at)}: {_shorten(error.message)}"] = None
    return _capped(sorted(found))


def model_errors(
    model: type[BaseModel], value: dict[str, Any]
) -> tuple[BaseModel | None, tuple[str, ...]]:
    """(the validated instance, ()) or (None, what the model's own validators refused)."""
    try:
        return model.model_validate(value), ()
    except ValidationError as exc:
        found = [
            f"{json_path(e['loc'])}: {_shorten(e['msg'])}"
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        return None, _capped(found or ["$: rejected by the contract's model"])
