"""JSON Schema's `pattern`, checked in time linear in the text.

jsonschema checks `pattern` with Python's `re`, which backtracks: `^(a+)+$` against 28
`a`s and a `!` held the event loop for 8.6 s, and every further `a` doubles it. A model
writes the text and an MCP server the pattern, so neither is trusted. Patterns are run
by pydantic-core's Rust engine (the one pydantic's own `pattern` uses), which is linear.
It lacks lookaround and backreferences; the rare pattern that needs them is run by the
`regex` engine, which backtracks as `re` does but gives up after `SEARCH_TIMEOUT_S`: a
text it gave up on is not accepted.

A key is text the model writes too: `patternProperties` and `additionalProperties` (which
skips the keys some pattern matches) test keys by the same engine. `propertyNames` checks
a key against its subschema, whose `pattern` is the one above.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from pydantic_core import SchemaError, SchemaValidator, core_schema

from ..memo import Bounded

SEARCH_TIMEOUT_S = 1.0
"""The longest one backtracking search may take (then TimeoutError, or no match)."""
_MATCHERS: Bounded[tuple[str, int], Callable[[str], bool]] = Bounded(1024)


def matcher(pattern: str, flags: int = 0) -> Callable[[str], bool]:
    """Whether a text holds a match of `pattern` anywhere (JSON Schema's meaning; `flags`:
    `re`'s, which only the backtracking engine takes). TimeoutError when a backtracking
    search gave up on the text (see `_backtracking`)."""
    found = _MATCHERS.get((pattern, flags))
    if found is None:
        found = _MATCHERS.put((pattern, flags), _compiled(pattern, flags))
    return found


def is_linear(pattern: str) -> bool:
    """Whether `pattern` runs in the linear engine (False: it needs lookaround or a
    backreference, so a backtracking engine runs it, for at most `SEARCH_TIMEOUT_S`)."""
    return _linear(pattern) is not None


def _backtracking(pattern: str, flags: int) -> Callable[[str], bool]:
    """Whether a text holds a match of `pattern` (with `re`'s `flags`), searched by a
    backtracking engine that raises TimeoutError after `SEARCH_TIMEOUT_S`. (A pattern
    `re` compiles and `regex` does not, which is rare, is searched by `re`, unbounded.)"""
    try:
        search = regex.compile(pattern, flags).search
    except (regex.error, ValueError, OverflowError, RecursionError):
        unbounded = re.compile(pattern, flags).search
        return lambda text: unbounded(text) is not None
    return lambda text: search(text, timeout=SEARCH_TIMEOUT_S) is not None


def _linear(pattern: str) -> SchemaValidator | None:
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError:  # lookaround or a backreference: only `re` has them
        return None


def _compiled(pattern: str, flags: int) -> Callable[[str], bool]:
    check = None if flags else _linear(pattern)
    if check is None:
        return _backtracking(pattern, flags)
    return lambda text: bool(check.isinstance_python(text))


def _key_matcher(pattern: str) -> Callable[[str], bool]:
    """`matcher` for keys: a key a backtracking search gave up on matches nothing (so
    `additionalProperties: false` refuses it)."""
    matches = matcher(pattern)

    def key_matches(key: str) -> bool:
        try:
            return matches(key)
        except TimeoutError:
            return False

    return key_matches


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = matcher(pattern)(instance)
    except TimeoutError:
        yield ValidationError(
            f"a text of {len(instance)} characters took over {SEARCH_TIMEOUT_S:g} s to check "
            f"against {pattern!r}: not accepted"
        )
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matches = _key_matcher(pattern)
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
    matchers = [_key_matcher(pattern) for pattern in schema.get("patternProperties", {})]
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
