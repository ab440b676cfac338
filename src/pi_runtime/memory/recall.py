"""Ranking a scope's facts against a query: embedding similarity, or BM25 without a model.

The embedder is tool retrieval's (the shipped all-MiniLM-L6-v2, offline, NumPy). Facts
keep the vector made when they were written, with the embedder's name; a fact written
without one (no model installed then) or by another embedder is embedded when ranked.
When the model cannot be loaded or fails, BM25 ranks and `Recall.fallback_reason` says
why: the switch is never silent. Equal scores go to the newer fact, so a scope's newest
facts fill the top-k when nothing in it resembles the query.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..exceptions import EmbedderUnavailable, UserError
from ..tools.retrieval import Embedder, default_embedder
from ..tools.retrieval.bm25 import BM25
from .facts import Fact

__all__ = ["Recall", "RecallMethod", "Recaller"]

RecallMethod = Literal["embedding", "bm25", "none"]
_SCORE_DIGITS = 6
_MAX_CACHED = 4_096


@dataclass(frozen=True, slots=True, kw_only=True)
class Recall:
    """The facts recalled for a query, best first, and how they were ranked.

    Attributes:
        facts: at most top-k facts, best first.
        scores: fact id -> similarity, for the facts returned.
        method: `embedding`, `bm25`, or `none` (the scope has no facts).
        fallback_reason: why BM25 ranked instead of the embedding model, if it did.
    """

    facts: tuple[Fact, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    method: RecallMethod = "none"
    fallback_reason: str | None = None


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        raise ValueError(f"vectors of {len(a)} and {len(b)} dimensions")
    norm = math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


class Recaller:
    """Embeds facts as they are written and ranks them when recalled.

    Args:
        embedder: `"auto"` loads the shipped all-MiniLM-L6-v2 on first need and falls back
            to BM25 if it cannot; an `Embedder` is used as given; None ranks with BM25 only.
    """

    def __init__(self, embedder: Embedder | Literal["auto"] | None = "auto") -> None:
        if embedder != "auto" and embedder is not None and not isinstance(embedder, Embedder):
            raise UserError(f"embedder must be 'auto', None or have embed(texts), got {embedder!r}")
        self._auto = embedder == "auto"
        self._embedder: Embedder | None = None if isinstance(embedder, str) else embedder
        self._load_error: str | None = None
        self._lock = threading.Lock()
        self._vectors: dict[tuple[str, str], tuple[float, ...]] = {}

    @property
    def uses_model(self) -> bool:
        """Whether an embedding model ranks (when one can be loaded), not BM25 alone."""
        return self._auto or self._embedder is not None

    def embedder(self) -> tuple[Embedder | None, str | None]:
        """The embedder, or None and why there is none (None: BM25 was chosen)."""
        with self._lock:
            if self._embedder is None and self._auto and self._load_error is None:
                try:
                    self._embedder = default_embedder()
                except EmbedderUnavailable as exc:
                    self._load_error = f"embedding model unavailable: {exc}"
            return self._embedder, self._load_error

    def embed_fact(self, text: str) -> tuple[tuple[float, ...] | None, str | None]:
        """`text`'s vector and the embedder's name, or (None, None) when there is no
        model or it fails: the fact is then kept without one and embedded when ranked."""
        model, _ = self.embedder()
        if model is None:
            return None, None
        try:
            (vector,) = model.embed([text])
            values = tuple(float(x) for x in vector)
        except Exception:
            return None, None
        if not values or not all(math.isfinite(x) for x in values):
            return None, None
        return values, _name(model)

    def rank(self, query: str, facts: Sequence[Fact], top_k: int) -> Recall:
        """The `top_k` facts closest to `query`, best first (`facts` newest first)."""
        if not facts:
            return Recall()
        model, reason = self.embedder()
        scores: list[float] | None = None
        if model is not None:
            scores, reason = self._embedding_scores(model, query, facts)
        method: RecallMethod = "embedding"
        if scores is None:
            method = "bm25"
            scores = BM25([f.text for f in facts]).scores(query)
        rounded = [round(s, _SCORE_DIGITS) for s in scores]
        order = sorted(range(len(facts)), key=lambda i: -rounded[i])  # stable: newer first
        chosen = order[:top_k]
        return Recall(
            facts=tuple(facts[i] for i in chosen),
            scores={facts[i].id: rounded[i] for i in chosen},
            method=method,
            fallback_reason=reason,
        )

    def _embedding_scores(
        self, model: Embedder, query: str, facts: Sequence[Fact]
    ) -> tuple[list[float] | None, str | None]:
        name = _name(model)
        vectors: list[tuple[float, ...] | None] = [
            f.embedding if f.embedder == name and f.embedding else self._vectors.get((name, f.id))
            for f in facts
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        try:
            # the query alone in its batch: its vector never depends on its neighbours
            (query_vector,) = model.embed([query])
            fresh = model.embed([facts[i].text for i in missing]) if missing else []
            if len(fresh) != len(missing):
                raise ValueError(f"{len(fresh)} vectors returned for {len(missing)} texts")
            with self._lock:
                if len(self._vectors) + len(missing) > _MAX_CACHED:
                    self._vectors.clear()
                for i, vector in zip(missing, fresh, strict=True):
                    vectors[i] = self._vectors[(name, facts[i].id)] = tuple(map(float, vector))
            scores = [_cosine(v or (), query_vector) for v in vectors]
        except Exception as exc:
            return None, f"embedding failed: {type(exc).__name__}: {exc}"
        if not all(math.isfinite(s) for s in scores):
            return None, "embedding failed: the vectors hold NaN or infinite values"
        return scores, None


def _name(model: Embedder) -> str:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__
