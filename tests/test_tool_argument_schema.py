"""The plain-schema shortcut never passes arguments jsonschema would refuse."""

from __future__ import annotations

from typing import Any

import pytest

from pi_runtime.tools.arguments import ArgumentSchema

PLAIN = {
    "type": "object",
    "properties": {
        "i": {"type": "integer", "description": "a count"},
        "x": {"type": "number"},
        "s": {"type": "string", "default": "a"},
        "b": {"type": "boolean"},
        "n": {"type": "null"},
    },
    "required": ["i"],
    "additionalProperties": False,
}
VALUES: list[Any] = [0, -3, 2**70, 1.0, 1.5, True, False, None, "", "1", [], {}, [1], {"i": 1}]


@pytest.mark.parametrize("name", ["i", "x", "s", "b", "n", "other"])
@pytest.mark.parametrize("value", VALUES)
def test_the_shortcut_vouches_only_for_what_jsonschema_accepts(name: str, value: Any) -> None:
    schema = ArgumentSchema.of(PLAIN)
    for arguments in ({name: value}, {"i": 1, name: value}):
        if schema.surely_valid(arguments):
            assert schema.validator.is_valid(arguments), arguments


def test_the_shortcut_takes_the_common_call_and_leaves_the_rest_to_jsonschema() -> None:
    schema = ArgumentSchema.of(PLAIN)
    assert schema.surely_valid({"i": 1, "x": 2, "s": "t", "b": True, "n": None})
    assert not schema.surely_valid({"i": True})  # a bool is no integer
    assert not schema.surely_valid({"x": 1})  # `i` is required
    assert not schema.surely_valid({"i": 1, "other": 1})  # closed


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"i": {"type": "integer", "maximum": 3}}},
        {"type": "object", "properties": {"i": {"type": ["integer", "null"]}}},
        {"type": "object", "properties": {"i": {"$ref": "#/$defs/I"}}, "$defs": {}},
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        {"type": "object", "minProperties": 2},
    ],
)
def test_a_schema_saying_more_than_scalar_types_is_always_checked_by_jsonschema(
    schema: dict[str, Any],
) -> None:
    assert ArgumentSchema.of(schema).plain is None


def test_a_schema_is_made_ready_once_and_an_equal_new_one_again() -> None:
    # every run builds a gate for its tools: the same schema object reuses its checker
    first = ArgumentSchema.of(PLAIN)
    assert ArgumentSchema.of(PLAIN) is first
    copy = {**PLAIN, "required": ["i", "x"]}
    other = ArgumentSchema.of(copy)
    assert other is not first
    assert not other.surely_valid({"i": 1})  # the copy's own rule, not the first's
    assert not other.validator.is_valid({"i": 1})


def test_schemas_listed_afresh_each_run_do_not_pile_up() -> None:
    from pi_runtime.tools import arguments

    for i in range(arguments._MAX_BUILT + 10):
        ArgumentSchema.of({"type": "object", "properties": {f"p{i}": {"type": "integer"}}})
    assert len(arguments._BUILT) <= arguments._MAX_BUILT


def test_a_pattern_is_checked_in_linear_time_with_json_schemas_meaning() -> None:
    # `re` backtracks: `^(a+)+$` against 28 `a`s and a `!` held the loop for 8.6 s, and
    # each further `a` doubles it; these 5,000 would never end
    checker = ArgumentSchema.of(
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    )
    errors = list(checker.validator.iter_errors({"s": "a" * 5000 + "!"}))
    assert [(e.validator, e.message.endswith("does not match '^(a+)+$'")) for e in errors] == [
        ("pattern", True)
    ]
    assert checker.validator.is_valid({"s": "a" * 5000})
    # a match anywhere, as JSON Schema means it (not `re.match`)
    anywhere = ArgumentSchema.of({"properties": {"s": {"pattern": "b"}}})
    assert anywhere.validator.is_valid({"s": "abc"})
    assert not anywhere.validator.is_valid({"s": "ac"})
    assert anywhere.validator.is_valid({"s": 5})  # a pattern says nothing of other types
    # lookaround, which the linear engine lacks, is still checked (by `re`)
    behind = ArgumentSchema.of({"properties": {"s": {"pattern": "(?<=a)b"}}})
    assert behind.validator.is_valid({"s": "ab"}) and not behind.validator.is_valid({"s": "xb"})
