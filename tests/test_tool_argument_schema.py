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
    # lookaround, which the linear engine lacks, is still checked (by a backtracking one)
    behind = ArgumentSchema.of({"properties": {"s": {"pattern": "(?<=a)b"}}})
    assert behind.validator.is_valid({"s": "ab"}) and not behind.validator.is_valid({"s": "xb"})


HOSTILE = "^(a+)+$"


def test_a_key_is_matched_against_pattern_properties_in_linear_time() -> None:
    # `re` took 1 s for `^(a+)+$` against 25 `a`s and a `!` as a key here, doubling with
    # each `a` (and `additionalProperties` searched the same patterns again)
    checker = ArgumentSchema.of(
        {
            "type": "object",
            "patternProperties": {HOSTILE: {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    key = "a" * 5000 + "!"
    errors = list(checker.validator.iter_errors({key: 1}))
    assert [(e.validator, e.message) for e in errors] == [
        ("additionalProperties", f"{key!r} does not match any of the regexes: {HOSTILE!r}")
    ]
    assert checker.validator.is_valid({"a" * 5000: 1})
    assert not checker.validator.is_valid({"a" * 5000: "one"})
    # a key's own `pattern` (propertyNames) is the linear `pattern` too
    names = ArgumentSchema.of({"type": "object", "propertyNames": {"pattern": HOSTILE}})
    assert not names.validator.is_valid({key: 1})


def test_pattern_properties_keep_json_schemas_meaning() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "patternProperties": {"^x_": {"type": "integer"}, "n": {"type": "number"}},
    }
    open_ = ArgumentSchema.of(schema).validator
    assert open_.is_valid({"id": "1", "x_a": 1, "name": 1.5, "other": "anything"})
    assert not open_.is_valid({"x_a": "1"})
    assert not open_.is_valid({"x_name": 1.5})  # every matching pattern applies
    assert not open_.is_valid({"banana": "1"})  # a match anywhere, not `re.match`
    [error] = open_.iter_errors({"x_a": "1"})
    assert (list(error.absolute_path), list(error.schema_path)) == (
        ["x_a"],
        ["patternProperties", "^x_", "type"],
    )

    closed = ArgumentSchema.of({**schema, "additionalProperties": False}).validator
    assert closed.is_valid({"id": "1", "x_a": 1, "banana": 2})
    assert [e.message for e in closed.iter_errors({"id": "1", "y": 1, "z": 2})] == [
        "'y', 'z' do not match any of the regexes: '^x_', 'n'"
    ]
    typed = ArgumentSchema.of({**schema, "additionalProperties": {"type": "boolean"}}).validator
    assert typed.is_valid({"x_a": 1, "y": True})
    assert [list(e.absolute_path) for e in typed.iter_errors({"x_a": 1, "y": 1})] == [["y"]]
    listed = ArgumentSchema.of(
        {"type": "object", "properties": {"id": {}}, "additionalProperties": False}
    ).validator
    assert [e.message for e in listed.iter_errors({"id": 1, "y": 1})] == [
        "Additional properties are not allowed ('y' was unexpected)"
    ]


def test_a_lookaround_in_pattern_properties_is_still_checked() -> None:
    checker = ArgumentSchema.of(
        {
            "type": "object",
            "patternProperties": {"(?<=x)y": {"type": "integer"}},
            "additionalProperties": False,
        }
    ).validator
    assert checker.is_valid({"xy": 1})
    assert not checker.is_valid({"xy": "1"})
    assert [e.message for e in checker.iter_errors({"zy": 1})] == [
        "'zy' does not match any of the regexes: '(?<=x)y'"
    ]


SLOW = "(?=(a*)*b)"  # lookaround: a backtracking engine, exponential in a run of `a`s


def test_a_backtracking_pattern_gives_up_on_a_hostile_text_and_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_runtime.tools import linear_pattern

    monkeypatch.setattr(linear_pattern, "SEARCH_TIMEOUT_S", 0.2)
    checker = ArgumentSchema.of({"properties": {"s": {"pattern": SLOW}}}).validator

    errors = list(checker.iter_errors({"s": "a" * 5000}))

    assert [e.message for e in errors] == [
        f"a text of 5000 characters took over 0.2 s to check against {SLOW!r}: not accepted"
    ]
    assert checker.is_valid({"s": "aab"})  # a text it can decide is decided as before


def test_a_key_a_backtracking_pattern_gives_up_on_matches_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_runtime.tools import linear_pattern

    monkeypatch.setattr(linear_pattern, "SEARCH_TIMEOUT_S", 0.2)
    checker = ArgumentSchema.of(
        {
            "type": "object",
            "patternProperties": {SLOW: {"type": "integer"}},
            "additionalProperties": False,
        }
    ).validator

    assert checker.is_valid({"ab": 1})
    assert not checker.is_valid({"a" * 5000: 1})  # refused: no pattern vouched for it
