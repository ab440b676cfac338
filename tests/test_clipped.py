"""`messages.clipped`: the one rule every error message and span uses to cut outside text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pi_runtime.messages import clipped


@given(st.text(), st.integers(min_value=0, max_value=50))
def test_a_clipped_text_is_within_its_limit_and_keeps_its_head(text: str, limit: int) -> None:
    shown = clipped(text, limit)
    assert len(shown) <= limit
    if len(text) <= limit:
        assert shown == text
    elif limit:
        assert shown.endswith("…")
        assert text.startswith(shown[:-1])
        assert len(shown) == limit


def test_edges() -> None:
    assert clipped("abc", 3) == "abc"
    assert clipped("abcd", 3) == "ab…"
    assert clipped("abcd", 1) == "…"
    assert clipped("abcd", 0) == ""
    assert clipped("", 0) == ""
