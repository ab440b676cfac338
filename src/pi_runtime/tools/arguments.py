"""Checking a call's argument text against its tool: JSON, then schema, then pydantic.

The JSON Schema the model was shown is checked first, so the model hears about its
mistakes in the terms it was given. Pydantic then converts to Python types and catches
what a schema cannot say (custom validators, and the few places where the two disagree,
e.g. `$` before a trailing newline in a `pattern`). A broken constraint reads the same
from either check: `$.n: must be <= 10, got 99`, the field's JSON path and its bound.

Most tools take a few scalars (`noop(i: int)`). For such a plain schema a few type checks
settle that arguments match it; only arguments they cannot vouch for go through
jsonschema, which then words any error as always. The check runs on every call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaError
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..memo import ByIdentity
from ..messages import clipped, hint_for, json_path, parse_object, redact
from .classify import described
from .linear_pattern import LinearValidator
from .spec import ToolSpec

MAX_REPORTED_ERRORS = 8
MAX_QUOTED_CHARS = 80
"""An offending value longer than this is quoted by its head only: the model wrote it."""
MAX_LINE_CHARS = 300


@dataclass(frozen=True, slots=True)
class BadArguments:
    """Why a call's arguments were refused: the `invalid_arguments` the model reads."""

    message: str
    hint: str


@dataclass(frozen=True, slots=True)
class GoodArguments:
    """Arguments that passed: as JSON (for a job or a hash) and as the function's kwargs."""

    arguments: dict[str, Any]
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Plain:
    """A schema of scalar properties only: each name's Python types, the required names."""

    types: dict[str, tuple[type, ...]]
    required: frozenset[str]
    closed: bool
    """No properties besides the listed ones (`additionalProperties: false`)."""


_SCALARS: dict[str, tuple[type, ...]] = {
    # exact types (`type(v) in ...`): a bool is no integer here, unlike in isinstance
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}
_NOTES = frozenset({"title", "description", "default"})
"""Annotations: keywords that never make an instance invalid."""


@dataclass(frozen=True, slots=True)
class ArgumentSchema:
    """A tool's parameter schema, ready to check arguments: built once per tool."""

    validator: Draft202012Validator
    plain: _Plain | None

    @classmethod
    def of(cls, schema: dict[str, Any]) -> ArgumentSchema:
        """The checker of `schema`, built once for each schema object: every run builds a
        gate for its tools, and building the validator was a twentieth of a short run. (A
        schema is read when its checker is built: change a tool's, and it is a new tool.)"""
        checker = _BUILT.get((schema,))
        if checker is None:
            checker = _BUILT.put((schema,), cls(LinearValidator(schema), _plain(schema)))
        return checker

    def surely_valid(self, arguments: dict[str, Any]) -> bool:
        """True only when `arguments` match the schema; False: ask jsonschema."""
        plain = self.plain
        if plain is None or not plain.required.issubset(arguments):
            return False
        types = plain.types
        for name, value in arguments.items():
            allowed = types.get(name)
            if allowed is None:
                if plain.closed:
                    return False
            elif type(value) not in allowed:
                return False
        return True


_MAX_BUILT = 1024
_BUILT: ByIdentity[ArgumentSchema] = ByIdentity(_MAX_BUILT)  # MCP tools, listed afresh each run, go


def _plain(schema: dict[str, Any]) -> _Plain | None:
    """The plain form of `schema`, or None when it says more than scalar types."""
    if schema.get("type") != "object" or not set(schema) <= _NOTES | {
        "type",
        "properties",
        "required",
        "additionalProperties",
    }:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, dict)
        or not isinstance(required, list)
        or type(extra) is not bool
    ):
        return None
    types: dict[str, tuple[type, ...]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or not set(sub) <= _NOTES | {"type"}:
            return None
        kind = sub.get("type")
        allowed = _SCALARS.get(kind) if isinstance(kind, str) else None
        if allowed is None:
            return None
        types[name] = allowed
    if not all(isinstance(name, str) for name in required):
        return None
    return _Plain(types=types, required=frozenset(required), closed=not extra)


def check_arguments(
    spec: ToolSpec, schema: ArgumentSchema, raw: str
) -> GoodArguments | BadArguments:
    """`raw` checked against `spec` (whose parameters `schema` holds); never raises."""
    arguments, problem = parse_object(raw)
    if arguments is None:
        return BadArguments(problem, "Send the arguments as one JSON object matching the schema.")
    errors = (
        []
        if schema.surely_valid(arguments)
        else sorted(
            schema.validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path))
        )
    )
    if errors:
        return BadArguments(
            "Arguments do not match the schema: " + _joined(map(describe_schema_error, errors)),
            hint_for("invalid_arguments"),
        )
    try:
        kwargs = spec.validate_parsed(arguments)  # parse_object repaired, refused non-finite
    except Exception as exc:  # pydantic's, or anything a validator of the tool's raised
        return BadArguments(rejection(exc), hint_for("invalid_arguments"))
    return GoodArguments(arguments, kwargs)


def rejection(exc: Exception) -> str:
    """Why the tool's own validation refused arguments, in the words the model reads:
    pydantic's errors by field, or the validator's exception in one line."""
    if isinstance(exc, ValidationError):
        return "Arguments were rejected: " + _joined(map(describe_pydantic_error, exc.errors()))
    # redacted before the cut, so a key in the validator's words is never half-shown
    return clipped(
        " ".join(redact(f"Arguments were rejected: {described(exc)}").split()), MAX_LINE_CHARS
    )


def describe_schema_error(error: SchemaError) -> str:
    """One JSON Schema error as `path: what is wrong`."""
    how = _explain(str(error.validator), error.validator_value, error.instance)
    return clipped(f"{json_path(error.absolute_path)}: {how or error.message}", MAX_LINE_CHARS)


def describe_pydantic_error(error: ErrorDetails) -> str:
    """One pydantic error as `path: what is wrong`, worded like the schema's."""
    ctx = error.get("ctx") or {}
    keyword, bound = _PYDANTIC_KEYWORDS.get(error["type"], (None, None))
    how = None
    if keyword is not None and bound is not None:
        how = _explain(_list_keyword(keyword, ctx), ctx.get(bound), error["input"])
    elif error["type"] == "finite_number":
        how = f"{_number(error['input'])} is not a finite number"
    elif error["type"] == "int_parsing_size":  # a whole float past 64 bits, such as 1e20
        how = f"{_number(error['input'])} is too large to send as a float; write out its digits"
    return clipped(f"{json_path(error['loc'])}: {how or error['msg']}", MAX_LINE_CHARS)


_PYDANTIC_KEYWORDS = {
    "less_than_equal": ("maximum", "le"),
    "greater_than_equal": ("minimum", "ge"),
    "less_than": ("exclusiveMaximum", "lt"),
    "greater_than": ("exclusiveMinimum", "gt"),
    "multiple_of": ("multipleOf", "multiple_of"),
    "string_too_long": ("maxLength", "max_length"),
    "string_too_short": ("minLength", "min_length"),
    "string_pattern_mismatch": ("pattern", "pattern"),
    "too_long": ("maxItems", "max_length"),
    "too_short": ("minItems", "min_length"),
}


def _list_keyword(keyword: str, ctx: dict[str, Any]) -> str:
    # pydantic says `too_long` for lists and dicts alike; JSON Schema tells them apart
    if ctx.get("field_type") == "Dictionary":
        return keyword.replace("Items", "Properties")
    return keyword


_COMPARISONS = {"maximum": "<=", "minimum": ">=", "exclusiveMaximum": "<", "exclusiveMinimum": ">"}
_SIZES = {
    "maxLength": ("at most", "character"),
    "minLength": ("at least", "character"),
    "maxItems": ("at most", "item"),
    "minItems": ("at least", "item"),
    "maxProperties": ("at most", "key"),
    "minProperties": ("at least", "key"),
}


def _explain(keyword: str, bound: Any, instance: Any) -> str | None:
    """The broken constraint in words, or None to keep the checker's own message."""
    if keyword in _COMPARISONS:
        return f"must be {_COMPARISONS[keyword]} {_number(bound)}, got {_number(instance)}"
    if keyword == "multipleOf":
        return f"must be a multiple of {_number(bound)}, got {_number(instance)}"
    if keyword in _SIZES:
        limit, noun = _SIZES[keyword]
        count = f"{bound} {noun}" if bound == 1 else f"{bound} {noun}s"
        size = len(instance) if isinstance(instance, str | list | dict) else instance
        if noun == "character":
            return f"must be {limit} {count} long, got {size}"
        return f"must have {limit} {count}, got {size}"
    if keyword == "pattern":
        return f"must match the pattern {bound!r}, got {_quote(instance)}"
    return None


def _number(value: Any) -> str:
    """A number as JSON spells it, `1.0` as `1`: both checks then word a bound alike."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return _quote(value)


def _quote(value: Any) -> str:
    if isinstance(value, str) and len(value) > MAX_QUOTED_CHARS:
        return f"{value[:MAX_QUOTED_CHARS]!r}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS] + "…"


def _joined(lines: Iterable[str]) -> str:
    shown = list(lines)
    out = shown[:MAX_REPORTED_ERRORS]
    if len(shown) > len(out):
        out.append(f"… and {len(shown) - len(out)} more")
    return "; ".join(out)
