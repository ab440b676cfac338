"""Properties of canonical action hashing and loop detection.

Loop detection must see the same action however the model spelled it (key order,
whitespace, `1` vs `1.0`), must tell different actions apart, and must catch A-A-A and
A-B-A-B tails whatever the hashes are.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from pi_runtime.loop import Limits, action_hash, canonical_json, detect_loop

# Integers a float represents exactly, so `n` and `float(n)` name the same number.
EXACT_INT = st.integers(min_value=-(2**53), max_value=2**53)

SCALARS = (
    st.none()
    | st.booleans()
    | EXACT_INT
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5)
TOOL_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)
HASHES = st.text(alphabet="0123456789abcdef", min_size=4, max_size=24)


def shuffled(value: Any, rng: random.Random) -> Any:
    """`value` with every dict's insertion order shuffled."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def ints_as_floats(value: Any) -> Any:
    """`value` with every integer (not bool) spelled as a float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: ints_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints_as_floats(v) for v in value]
    return value


@given(JSON_VALUES, st.randoms(use_true_random=False))
def test_canonical_json_ignores_key_order(value: Any, rng: random.Random) -> None:
    assert canonical_json(shuffled(value, rng)) == canonical_json(value)


@given(TOOL_NAMES, JSON_OBJECTS, st.randoms(use_true_random=False))
def test_action_hash_ignores_key_order(name: str, arguments: Any, rng: random.Random) -> None:
    reordered = shuffled(arguments, rng)
    assert action_hash(name, reordered, json.dumps(reordered)) == action_hash(
        name, arguments, json.dumps(arguments)
    )


@given(
    TOOL_NAMES,
    JSON_OBJECTS,
    st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\t")]),
)
def test_action_hash_ignores_whitespace_in_the_raw_json(
    name: str, arguments: Any, indent: int | str | None, separators: tuple[str, str]
) -> None:
    compact = json.dumps(arguments, separators=(",", ":"))
    spaced = json.dumps(arguments, indent=indent, separators=separators)
    assert action_hash(name, json.loads(spaced), spaced) == action_hash(
        name, json.loads(compact), compact
    )


@given(TOOL_NAMES, JSON_OBJECTS)
def test_unparseable_arguments_hash_the_same_whatever_their_whitespace(
    name: str, arguments: Any
) -> None:
    # Broken JSON has no parse, so the raw text (minus whitespace) is what is compared.
    compact = json.dumps(arguments, separators=(",", ":"))[:-1]
    spaced = json.dumps(arguments, indent=2)[:-1]
    # json.dumps escapes control characters, so spaces are the only whitespace in strings.
    assume(" " not in compact)
    assert action_hash(name, None, spaced) == action_hash(name, None, compact)


@given(JSON_VALUES)
def test_canonical_json_ignores_integer_spelling(value: Any) -> None:
    assert canonical_json(ints_as_floats(value)) == canonical_json(value)


@given(TOOL_NAMES, JSON_OBJECTS)
def test_action_hash_treats_one_and_one_point_zero_alike(name: str, arguments: Any) -> None:
    as_floats = ints_as_floats(arguments)
    assert action_hash(name, as_floats, json.dumps(as_floats)) == action_hash(
        name, arguments, json.dumps(arguments)
    )


@given(TOOL_NAMES, JSON_OBJECTS, st.text(max_size=6), JSON_VALUES)
def test_adding_an_argument_changes_the_hash(
    name: str, arguments: dict[str, Any], key: str, value: Any
) -> None:
    assume(key not in arguments)
    bigger = {**arguments, key: value}
    assert canonical_json(bigger) != canonical_json(arguments)
    assert action_hash(name, bigger, "") != action_hash(name, arguments, "")


@given(TOOL_NAMES, TOOL_NAMES, JSON_OBJECTS)
def test_a_different_tool_changes_the_hash(first: str, second: str, arguments: Any) -> None:
    assume(first != second)
    assert action_hash(first, arguments, "") != action_hash(second, arguments, "")


@given(TOOL_NAMES, st.text(max_size=6), st.text(max_size=8), st.text(max_size=8))
def test_a_different_string_value_changes_the_hash(
    name: str, key: str, value: str, other: str
) -> None:
    assume(value != other)
    assert action_hash(name, {key: value}, "") != action_hash(name, {key: other}, "")


@given(TOOL_NAMES, st.text(max_size=6), EXACT_INT)
def test_a_number_and_its_string_hash_differently(name: str, key: str, n: int) -> None:
    assert action_hash(name, {key: n}, "") != action_hash(name, {key: str(n)}, "")


def test_booleans_are_not_numbers() -> None:
    assert canonical_json({"flag": True}) != canonical_json({"flag": 1})
    assert canonical_json({"flag": False}) != canonical_json({"flag": 0.0})
    assert action_hash("t", {"flag": True}, "") != action_hash("t", {"flag": 1}, "")


def test_negative_zero_is_zero() -> None:
    assert canonical_json({"x": -0.0}) == canonical_json({"x": 0})


# --- loop detection -----------------------------------------------------------------------

LIMITS = st.builds(
    Limits,
    loop_window=st.integers(min_value=4, max_value=12),
    loop_threshold=st.integers(min_value=2, max_value=3),
)


@given(st.lists(HASHES, max_size=20), HASHES, LIMITS)
def test_detect_loop_catches_any_triple_repeat(
    prefix: list[str], action: str, limits: Limits
) -> None:
    assert detect_loop((*prefix, action, action, action), limits) is not None


@given(st.lists(HASHES, max_size=20), HASHES, HASHES, LIMITS)
def test_detect_loop_catches_any_a_b_a_b_tail(
    prefix: list[str], a: str, b: str, limits: Limits
) -> None:
    assume(a != b)
    assert detect_loop((*prefix, a, b, a, b), limits) is not None


@given(st.lists(HASHES, max_size=20), HASHES, HASHES)
def test_detect_loop_catches_a_b_a_b_with_default_limits(prefix: list[str], a: str, b: str) -> None:
    assume(a != b)
    assert detect_loop((*prefix, a, b, a, b), Limits()) is not None


@given(st.lists(HASHES, unique=True, max_size=40), LIMITS)
def test_detect_loop_does_not_flag_distinct_actions(actions: list[str], limits: Limits) -> None:
    sequence = tuple(actions)
    for end in range(len(sequence) + 1):
        assert detect_loop(sequence[:end], limits) is None


@given(st.lists(HASHES, unique=True, min_size=3, max_size=3))
def test_detect_loop_needs_a_full_repeat_of_the_cycle(abc: list[str]) -> None:
    a, b, c = abc
    # A-B-A and A-B-C-A are not (yet) loops; A-B-C-A-B-C is.
    assert detect_loop((a, b, a), Limits()) is None
    assert detect_loop((a, b, c, a), Limits()) is None
    assert detect_loop((a, b, c, a, b, c), Limits()) is not None


FLAT_OBJECTS = st.dictionaries(
    st.text(st.characters(exclude_categories=()), max_size=6),
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(st.characters(exclude_categories=()), max_size=8),
    max_size=6,
)


@given(FLAT_OBJECTS)
def test_a_flat_object_is_spelled_as_the_json_encoder_spells_it(arguments: dict[str, Any]) -> None:
    # flat arguments skip the encoder's setup: the text (hashed, and fingerprinted for
    # approvals) must stay the encoder's, surrogates and control characters included
    expected = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    assert canonical_json(arguments) == expected
