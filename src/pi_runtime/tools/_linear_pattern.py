"""JSON Schema's `pattern`, checked in time linear in the text.

jsonschema checks `pattern` with Python's `re`, which backtracks: `^(a+)+$` against 28
`a`s and a `!` held the event loop for 8.6 s, and every further `a` doubles it. A model
writes the text and an MCP server the pattern, so neither is trusted. Patterns are run
by pydantic-core's Rust engine (the one pydantic's own `pattern` uses), which is linear.
It lacks lookaround and backreferences; the rare pattern that needs them is run by `re`.
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


def _compiled(pattern: str) -> Callable[[str], bool]:
    try:
        check = SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError:  # lookaround or a backreference: only `re` has them
        search = re.compile(pattern).search
        return lambda text: search(text) is not None
    return lambda text: bool(check.isinstance_python(text))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not matcher(pattern)(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_extend: Callable[..., type[Draft202012Validator]] = validators.extend  # untyped upstream
LinearValidator = _extend(Draft202012Validator, {"pattern": _pattern})
"""Draft 2020-12, its `pattern` checked by `matcher`."""
