"""`parse_object` with its one shared decoder reads and refuses as `json.loads` did."""

from __future__ import annotations

import pytest

from pi_runtime.messages import parse_object


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("\ufeff{}", "Unexpected UTF-8 BOM"),
        ('{"a": NaN}', "$.a: NaN is not a finite number"),
        ('{"a": [1e999]}', "$.a[0]: 1e999 is not a finite number"),
        ("[1]", "must be a JSON object, got list"),
        ("{", "not valid JSON: Expecting property name"),
        ('{"a": 1}x', "not valid JSON: Extra data: line 1 column 9 (char 8)"),
        ('{"a": 1} {"b": 2}', "not valid JSON: Extra data: line 1 column 10 (char 9)"),
        ('{"a": [1, }', "not valid JSON: Expecting value: line 1 column 11 (char 10)"),
    ],
)
def test_bad_arguments_are_refused_saying_why(raw: str, why: str) -> None:
    value, problem = parse_object(raw)

    assert value is None and why in problem


def test_the_decoder_keeps_no_state_between_calls() -> None:
    assert parse_object('{"a": 1.5, "b": "\\ud800"}') == ({"a": 1.5, "b": "\ufffd"}, "")
    assert parse_object('{"a": NaN}')[0] is None
    assert parse_object('{"c": 2}') == ({"c": 2}, "")


@pytest.mark.parametrize("raw", ['{"a":1}', ' {"a":1}', '{"a":1}\n', '\t{"a": 1} \r\n'])
def test_whitespace_around_the_object_is_read_as_json_loads_reads_it(raw: str) -> None:
    assert parse_object(raw) == ({"a": 1}, "")
