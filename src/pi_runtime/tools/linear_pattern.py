"""JSON Schema's `pattern`, checked in time linear in the text.

jsonschema checks `pattern` with Python's `re`, which backtracks: `^(a+)+$` against 28
`a`s and a `!` held the event loop for 8.6 s, and every further `a` doubles it. A model
writes the text and an MCP server the pattern, so neither is trusted. Patterns are run
by pydantic-core's Rust engine (the one pydantic's own `pattern` uses), which is linear.
It lacks lookaround and backreferences; the rare pattern that needs them is run by `re`.

A key is text the model writes too: `patternProperties` and `additionalProperties` (which
skips the keys some pattern matches) test keys by the same engine. `propertyNames` checks
a key against its subschema, whose `pattern` is the one above.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from pydantic_core import SchemaError, SchemaValidator, core_schema

from ..memo import Bounded

_MATCHERS: Bounded[str, Callable[[str], bool]] = Bounded(1024)


def matcher(pattern: str) -> Callable[[str], bool]:
    """Whether a text holds a match of `pattern` anywhere (JSON Schema's meaning)."""
    found = _MATCHERS.get(pattern)
    if found is None:
        found = _MATCHERS.put(pattern, _compiled(pattern))
    return found


def is_linear(pattern: str) -> bool:
    """Whether `pattern` runs in the linear engine (False: it needs lookaround or a
    backreference, so `re` runs it, which may take time exponential in the text)."""
    return _linear(pattern) is not None


def _linear(pattern: str) -> SchemaValidator | None:
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError:  # lookaround or a backreference: only `re` has them
        return None


def _compiled(pattern: str) -> Callable[[str], bool]:
    check = _linear(pattern)
    if check is None:
        search = re.compile(pattern).search
        return lambda text: search(text) is not None
    return lambda text: bool(check.isinstance_python(text))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not matcher(pattern)(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matches = matcher(pattern)
        for key, value in instance.items():
            if matches(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _unlisted(instance, schema)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif not additional and extras:  # jsonschema's own words
        keys = ", ".join(map(repr, sorted(extras)))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(map(repr, sorted(schema["patternProperties"])))
            yield ValidationError(f"{keys} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({keys} {verb} unexpected)"
            )


def _unlisted(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The keys neither `properties` names nor a `patternProperties` pattern matches."""
    listed = schema.get("properties", {})
    matchers = [matcher(pattern) for pattern in schema.get("patternProperties", {})]
    return [
        key
        for key in instance
        if key not in listed and not any(matches(key) for matches in matchers)
    ]


_extend: Callable[..., type[Draft202012Validator]] = validators.extend  # untyped upstream
LinearValidator = _extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)
"""Draft 2020-12, its patterns (`pattern`, `patternProperties`) checked by `matcher`."""
