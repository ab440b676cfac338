"""Bounded memos: what they keep, what they never keep, and how much."""

from __future__ import annotations

import pytest

from pi_runtime.memo import SMALL_CHARS, Bounded, ByIdentity, chars, small_texts


def test_bounded_drops_the_oldest_when_full() -> None:
    kept: Bounded[str, int] = Bounded(2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 10)  # a key already there takes no room
    assert len(kept) == 2 and kept.get("a") == 10
    assert kept.put("c", 3) == 3
    assert "a" not in kept and kept.get("a") is None
    assert kept.get("b") == 2 and kept.get("c") == 3
    for i in range(1000):
        kept.put(str(i), i)
    assert len(kept) == 2


def test_bounded_refuses_a_limit_that_keeps_nothing() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Bounded(0)


def test_by_identity_finds_only_the_very_same_objects() -> None:
    kept: ByIdentity[str] = ByIdentity(8)
    schema = {"type": "object"}
    kept.put((schema,), "built", also=("fetch",))
    assert kept.get((schema,), also=("fetch",)) == "built"
    assert kept.get(({"type": "object"},), also=("fetch",)) is None  # equal, not the same
    assert kept.get((schema,), also=("other",)) is None  # the facts beside it differ
    assert kept.get((schema, schema), also=("fetch",)) is None


def test_by_identity_holds_its_objects_so_their_ids_stay_theirs() -> None:
    kept: ByIdentity[int] = ByIdentity(8)
    kept.put(({"n": 1},), 1)  # the caller keeps no reference
    # had the dict been freed, a new one could take its id and find the old value
    for n in range(100):
        assert kept.get(({"n": n},)) is None


def test_by_identity_stays_bounded() -> None:
    kept: ByIdentity[int] = ByIdentity(4)
    held = [{"n": n} for n in range(50)]
    for n, obj in enumerate(held):
        kept.put((obj,), n)
    assert len(kept) == 4
    assert kept.get((held[-1],)) == 49 and kept.get((held[0],)) is None


def test_small_texts_keeps_small_results_and_works_out_large_ones_every_time() -> None:
    calls: list[str] = []

    @small_texts(2, chars)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert upper("ab") == "AB" and upper("ab") == "AB"
    assert calls == ["ab"]
    large = "x" * (SMALL_CHARS + 1)
    assert upper(large) == large.upper() and upper(large) == large.upper()
    assert calls.count(large) == 2  # never kept
    upper("c")
    upper("d")  # "ab" is the least recently used of three: it goes
    upper("ab")
    assert calls.count("ab") == 2
    assert upper.__name__ == "upper" and upper.__doc__ is None


def test_small_texts_measures_with_the_given_size() -> None:
    calls: list[tuple[str, ...]] = []

    def total(*texts: str) -> int:
        return sum(map(len, texts))

    @small_texts(8, total, max_chars=4)
    def joined(*texts: str) -> str:
        calls.append(texts)
        return "".join(texts)

    joined("ab", "cd")
    joined("ab", "cd")
    joined("ab", "cde")
    joined("ab", "cde")
    assert calls == [("ab", "cd"), ("ab", "cde"), ("ab", "cde")]
