"""Which tools to offer the model this turn, when there are too many to offer all.

Up to `threshold` tools are all offered. Past it, each tool's text (name, description,
parameters) is compared with the request and only the `top_k` closest are offered, plus
the `always_include` tools. Closeness is embedding similarity; when the embedding model
cannot be loaded or fails, BM25 ranks instead and the `Selection` says why — the switch
is never silent.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...exceptions import UserError
from ...messages import AssistantMessage, Message, TextBlock, UserMessage
from ..spec import ToolSpec
from .bm25 import BM25
from .embedder import Embedder, EmbedderUnavailable, default_embedder

__all__ = ["Selection", "ToolRetriever", "retrieval_query", "tool_text"]

Method = Literal["all", "embedding", "bm25"]
_MAX_CACHED = 4096
_SCORE_DIGITS = 6  # scores are rounded so ranks don't hinge on float noise between runs


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What was offered and why; JSON-able with `dataclasses.asdict` for the trace.

    Attributes:
        method: `all` (at or under the threshold), `embedding`, or `bm25`.
        selected: names offered, in the toolset's own order (a stable prefix for caches).
        scores: name -> similarity for every tool ranked (empty for `all`).
        always: the always-include names, offered whatever their score.
        fallback_reason: why BM25 ranked instead of the embedding model, if it did.
    """

    method: Method
    selected: tuple[str, ...]
    scores: dict[str, float] = field(default_factory=dict)
    always: tuple[str, ...] = ()
    fallback_reason: str | None = None


def tool_text(spec: ToolSpec) -> str:
    """What a tool is matched on: its name in words, description and parameters."""
    words = spec.name.replace("_", " ").replace("-", " ").replace(".", " ")
    parts = [f"{words}: {spec.description}"]
    properties: dict[str, Any] = spec.parameters.get("properties", {})
    params = []
    for name, schema in properties.items():
        about = [str(schema["description"])] if schema.get("description") else []
        if isinstance(schema.get("enum"), list):
            about.append("one of " + ", ".join(str(v) for v in schema["enum"]))
        params.append(f"{name} ({'; '.join(about)})" if about else name)
    if params:
        parts.append("Parameters: " + ", ".join(params) + ".")
    return " ".join(parts)


def retrieval_query(messages: Sequence[Message]) -> str:
    """The latest user message, plus the commentary of the assistant's reply to it, if any."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            commentary = ""
            for later in messages[index + 1 :]:
                if isinstance(later, AssistantMessage):
                    text = " ".join(
                        b.text
                        for b in later.content
                        if isinstance(b, TextBlock) and b.phase == "commentary"
                    ).strip()
                    commentary = text or commentary
            return f"{message.content}\n{commentary}".strip()
    return ""


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


class ToolRetriever:
    """Chooses the tools to offer for a request.

    Args:
        threshold: offer every tool while there are at most this many.
        top_k: past the threshold, how many of the best-ranked tools to offer (on top of
            `always_include`).
        always_include: names offered every turn, whatever their rank.
        embedder: `"auto"` loads the shipped all-MiniLM-L6-v2 on first need and falls back
            to BM25 if it can't; an `Embedder` is used as given; `None` ranks with BM25 only.
    """

    def __init__(
        self,
        *,
        threshold: int = 20,
        top_k: int = 8,
        always_include: Iterable[str] = (),
        embedder: Embedder | Literal["auto"] | None = "auto",
    ) -> None:
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
            raise UserError(f"threshold must be an integer >= 0, got {threshold!r}")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise UserError(f"top_k must be an integer >= 1, got {top_k!r}")
        if isinstance(always_include, str):
            raise UserError(
                f"always_include takes a list of names, got the string {always_include!r}"
            )
        always = tuple(dict.fromkeys(always_include))
        if not all(isinstance(name, str) for name in always):
            raise UserError(f"always_include takes tool names (strings), got {always!r}")
        if embedder != "auto" and embedder is not None and not isinstance(embedder, Embedder):
            raise UserError(f"embedder must be 'auto', None or have embed(texts), got {embedder!r}")
        self.threshold = threshold
        self.top_k = top_k
        self.always = always
        self._auto = embedder == "auto"
        self._embedder: Embedder | None = None if isinstance(embedder, str) else embedder
        self._load_error: str | None = None
        self._vectors: dict[tuple[str, str], list[float]] = {}
        self._bm25: tuple[tuple[str, ...], BM25] | None = None

    def select(self, query: str, tools: Sequence[ToolSpec]) -> Selection:
        """The tools to offer for `query` (see `retrieval_query`), and how they were chosen."""
        if not isinstance(query, str):
            raise UserError(f"query must be a string, got {type(query).__name__}")
        names = [spec.name for spec in tools]
        if len(set(names)) != len(names):
            twice = sorted(n for n, count in Counter(names).items() if count > 1)
            raise UserError(f"tool names must be unique; repeated: {', '.join(twice)}")
        unknown = [name for name in self.always if name not in names]
        if unknown:
            raise UserError(f"always_include names tools not in the toolset: {', '.join(unknown)}")
        if len(tools) <= self.threshold:
            return Selection(method="all", selected=tuple(names), always=self.always)
        texts = [tool_text(spec) for spec in tools]
        method: Method = "embedding"
        ranked, reason = self._embedding_scores(query, names, texts)
        if ranked is None:
            method, ranked = "bm25", self._bm25_scores(query, texts)
        scores = {
            name: round(score, _SCORE_DIGITS) for name, score in zip(names, ranked, strict=True)
        }
        always = set(self.always)
        candidates = [i for i, name in enumerate(names) if name not in always]
        candidates.sort(key=lambda i: (-scores[names[i]], i))  # ties: toolset order
        chosen = always | {names[i] for i in candidates[: self.top_k]}
        return Selection(
            method=method,
            selected=tuple(name for name in names if name in chosen),
            scores=scores,
            always=self.always,
            fallback_reason=reason,
        )

    @property
    def fallback_reason(self) -> str | None:
        """Why the embedding model could not be loaded, once that was tried and failed."""
        return self._load_error

    def _resolve_embedder(self) -> Embedder | None:
        if self._embedder is None and self._auto and self._load_error is None:
            try:
                self._embedder = default_embedder()
            except EmbedderUnavailable as exc:
                self._load_error = f"embedding model unavailable: {exc}"
        return self._embedder

    def _embedding_scores(
        self, query: str, names: list[str], texts: list[str]
    ) -> tuple[list[float] | None, str | None]:
        """Cosine scores, or None and the reason BM25 must rank instead."""
        embedder = self._resolve_embedder()
        if embedder is None:
            return None, self._load_error  # None when BM25 was chosen, not fallen back to
        keys = [
            (n, hashlib.sha256(t.encode()).hexdigest()) for n, t in zip(names, texts, strict=True)
        ]
        missing = [i for i, key in enumerate(keys) if key not in self._vectors]
        try:
            # The query is embedded on its own: its vector then never depends on which
            # tools happened to share its batch (padding shifts the last float bits).
            fresh = embedder.embed([texts[i] for i in missing]) if missing else []
            (query_vector,) = embedder.embed([query])
            if len(fresh) != len(missing):
                raise ValueError(f"{len(fresh)} vectors returned for {len(missing)} texts")
        except Exception as exc:
            return None, f"embedding failed: {type(exc).__name__}: {exc}"
        if len(self._vectors) + len(missing) > _MAX_CACHED:
            # Toolsets churning this much: keep only the current tools' vectors.
            self._vectors = {key: self._vectors[key] for key in keys if key in self._vectors}
        for i, vector in zip(missing, fresh, strict=True):
            self._vectors[keys[i]] = list(vector)
        try:
            scores = [_cosine(self._vectors[key], query_vector) for key in keys]
        except ValueError as exc:  # vectors of different lengths
            return None, f"embedding failed: {exc}"
        if not all(math.isfinite(score) for score in scores):
            return None, "embedding failed: the vectors hold NaN or infinite values"
        return scores, None

    def _bm25_scores(self, query: str, texts: list[str]) -> list[float]:
        key = tuple(texts)
        if self._bm25 is None or self._bm25[0] != key:
            self._bm25 = (key, BM25(texts))
        return self._bm25[1].scores(query)
