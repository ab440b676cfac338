"""`LocalMemoryStore`: long-term facts in one process's memory.

For examples, evals and tests without a database. It keeps facts exactly as the durable
store does (cleaned text, one fact per scope and key, newest first), and forgets them
when the process ends.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Unpack

from .facts import RECALL_WINDOW, Fact, FactOrigin, check_limit, check_scope, new_fact

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
        **origin: Unpack[FactOrigin],
    ) -> tuple[Fact, bool]:
        new = new_fact(scope, text, origin)
        with self._lock:
            facts = self._facts.setdefault(scope, {})
            known = facts.get(new.key)
            if known is not None:
                return known, False
            fact = Fact(
                id=f"fact-{uuid.uuid4().hex[:16]}",
                scope=scope,
                text=new.text,
                created_at=self._clock(),
                session_id=new.session_id,
                run_id=new.run_id,
                embedding=new.embedding,
                embedder=new.embedder,
            )
            facts[new.key] = fact
            return fact, True

    def list_facts(self, scope: str, *, limit: int = RECALL_WINDOW) -> list[Fact]:
        check_scope(scope)
        check_limit(limit)
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
