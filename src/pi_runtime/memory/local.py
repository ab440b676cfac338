"""`LocalMemoryStore`: long-term facts in one process's memory.

For examples, evals and tests without a database. It keeps facts exactly as the durable
store does (cleaned text, one fact per scope and key, newest first), and forgets them
when the process ends.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ..exceptions import UserError
from .facts import RECALL_WINDOW, Fact, check_embedding, check_scope, clean_fact, fact_key

__all__ = ["LocalMemoryStore"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LocalMemoryStore:
    """A `MemoryStore` in memory; thread-safe (tools run in worker threads).

    Args:
        clock: where `created_at` comes from (aware UTC).
    """

    def __init__(self, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._facts: dict[str, dict[str, Fact]] = {}  # scope -> key -> fact, oldest first

    def remember_fact(
        self,
        scope: str,
        text: str,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        embedding: Sequence[float] | None = None,
        embedder: str | None = None,
    ) -> tuple[Fact, bool]:
        check_scope(scope)
        text = clean_fact(text)
        vector = check_embedding(embedding)
        if (vector is None) != (embedder is None):
            raise UserError("an embedding and the name of its embedder go together")
        key = fact_key(text)
        with self._lock:
            facts = self._facts.setdefault(scope, {})
            known = facts.get(key)
            if known is not None:
                return known, False
            fact = Fact(
                id=f"fact-{uuid.uuid4().hex[:16]}",
                scope=scope,
                text=text,
                created_at=self._clock(),
                session_id=session_id,
                run_id=run_id,
                embedding=vector,
                embedder=embedder,
            )
            facts[key] = fact
            return fact, True

    def list_facts(self, scope: str, *, limit: int = RECALL_WINDOW) -> list[Fact]:
        check_scope(scope)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UserError(f"limit must be a positive integer, got {limit!r}")
        with self._lock:
            facts = list(self._facts.get(scope, {}).values())
        return facts[::-1][:limit]

    def forget_fact(self, scope: str, fact_id: str) -> bool:
        check_scope(scope)
        with self._lock:
            facts = self._facts.get(scope, {})
            for key, fact in facts.items():
                if fact.id == fact_id:
                    del facts[key]
                    return True
        return False
