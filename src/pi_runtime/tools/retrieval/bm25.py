"""Okapi BM25 over short documents, for ranking tools when no embedding model is at hand.

Terms are lowercased words (snake_case and camelCase split, a plural `s` dropped, common
English stop words skipped) plus each CJK character and each pair of adjacent ones, so a
Chinese query can match a Chinese description without a segmenter.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["BM25", "terms"]

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# A word list reads best as one string.
_STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it me my of on or please "  # noqa: SIM905
    "the this to what when where which who will with you your".split()
)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The BM25 terms of `text`, in order of appearance."""
    out = [_stem(word.lower()) for word in _WORD.findall(text) if word.lower() not in _STOP]
    for run in _CJK_RUN.findall(text):
        out.extend(run)
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


class BM25:
    """A BM25 index over `documents` (k1 = 1.5, b = 0.75)."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._docs = [Counter(terms(doc)) for doc in documents]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._average = (sum(self._lengths) / len(self._docs)) if self._docs else 0.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        n = len(self._docs)
        # The +1 inside the log keeps every idf positive, even for a term in every document.
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}

    def scores(self, query: str) -> list[float]:
        """One score per document, in document order; 0.0 when no term matches."""
        query_terms = set(terms(query))
        out: list[float] = []
        for doc, length in zip(self._docs, self._lengths, strict=True):
            norm = (
                self.k1 * (1 - self.b + self.b * length / self._average) if self._average else 0.0
            )
            score = 0.0
            for term in query_terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.k1 + 1) / (tf + norm)
            out.append(score)
        return out
