"""Long-term facts (memory layer L3): the `Fact` record, the `MemoryStore` protocol, and
the rules every store applies to what it keeps.

A fact is a short text kept for a `scope` (a user, a tenant: `user:alice`,
`tenant:acme`) across sessions. Stores clean the text the same way (`clean_fact`) and
keep one fact per scope and `fact_key`, so remembering the same thing twice returns the
first copy. The durable store (`pi_runtime.durable.Store`, SQLite or PostgreSQL)
satisfies `MemoryStore`; `LocalMemoryStore` (`local.py`) does in one process.

Fact text is data written by a model, maybe at a user's or a web page's dictation: it is
stored and shown as quoted data (`render.py`), never as instructions.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from ..exceptions import UserError
from ..messages import check_keywords, check_name, redact, repair_text

__all__ = [
    "MAX_EMBEDDING_DIMENSIONS",
    "MAX_FACT_CHARS",
    "MAX_SCOPE_CHARS",
    "RECALL_WINDOW",
    "Fact",
    "FactOrigin",
    "MemoryStore",
    "NewFact",
    "check_embedding",
    "check_limit",
    "check_scope",
    "clean_fact",
    "fact_key",
    "new_fact",
]

MAX_FACT_CHARS = 1_000
"""The longest fact kept, in characters after cleaning: a fact, not a document."""

MAX_SCOPE_CHARS = 266
"""The longest scope a store keeps: an agent's scope (`MAX_POLICY_SCOPE_CHARS`) under the
tenant of a served session (`session_scope`: a tenant of up to 64 characters and a `/`)."""
MAX_POLICY_SCOPE_CHARS = 200
"""The longest scope an agent names."""
MAX_EMBEDDING_DIMENSIONS = 4_096

RECALL_WINDOW = 1_000
"""How many of a scope's newest facts recall ranks (each ranking reads them all)."""

# Bidirectional overrides and isolates: they can make a stored fact read differently on
# screen than it is; nothing a fact needs.
_BIDI = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """One long-term fact of a scope.

    Attributes:
        id: the store's id for it (`fact-…`).
        scope: whose fact it is (`user:alice`, `tenant:acme`).
        text: the fact, cleaned (`clean_fact`).
        created_at: when it was first kept (aware UTC).
        session_id: the conversation it came from, if any.
        run_id: the run that wrote it, if any.
        embedding: its vector from `embedder`, None when none was at hand.
        embedder: the name of the model that made `embedding`.
    """

    id: str
    scope: str
    text: str
    created_at: datetime
    session_id: str | None = None
    run_id: str | None = None
    embedding: tuple[float, ...] | None = None
    embedder: str | None = None

    @property
    def source(self) -> str:
        """Where the fact came from: `session:ID run:ID`, or `-` when unknown."""
        parts = [f"session:{self.session_id}"] if self.session_id else []
        parts += [f"run:{self.run_id}"] if self.run_id else []
        return " ".join(parts) or "-"


def check_scope(scope: object) -> str:
    """`scope` if it is a usable scope name, else UserError."""
    if not isinstance(scope, str) or not scope or len(scope) > MAX_SCOPE_CHARS:
        raise UserError(
            f"a memory scope must be a non-empty string of at most {MAX_SCOPE_CHARS} "
            f"characters, got {scope!r}"
        )
    if not scope.isprintable() or scope != scope.strip():
        raise UserError(f"a memory scope must be printable, without surrounding spaces: {scope!r}")
    return scope


def clean_fact(text: object) -> str:
    """The text a store keeps for `text`, or UserError when there is nothing to keep.

    One line: Unicode NFC, every run of whitespace (line breaks included) one space,
    control and bidirectional-override characters gone, secrets masked (`redact`), at
    most `MAX_FACT_CHARS` characters.
    """
    if not isinstance(text, str):
        raise UserError(f"a fact must be a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", repair_text(text)).translate(_BIDI)
    text = "".join(c for c in text if c.isspace() or unicodedata.category(c) != "Cc")
    text = redact(_SPACES.sub(" ", text).strip())
    if not text:
        raise UserError("a fact must hold some text")
    if len(text) > MAX_FACT_CHARS:
        raise UserError(
            f"a fact is at most {MAX_FACT_CHARS} characters, got {len(text)}: keep one "
            "short statement per fact"
        )
    return text


def fact_key(text: str) -> str:
    """The identity of a cleaned fact within its scope: the same key, the same fact.

    Case and Unicode compatibility forms do not count (`Alice likes TEA` = `alice likes
    tea`); anything else does.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return hashlib.sha256(folded.encode()).hexdigest()


def check_embedding(embedding: Sequence[float] | None) -> tuple[float, ...] | None:
    """`embedding` as a tuple of finite floats (None stays None), else UserError."""
    if embedding is None:
        return None
    if isinstance(embedding, str | bytes) or not isinstance(embedding, Sequence):
        raise UserError("an embedding must be a list of numbers")
    if not 0 < len(embedding) <= MAX_EMBEDDING_DIMENSIONS:
        raise UserError(
            f"an embedding has 1 to {MAX_EMBEDDING_DIMENSIONS} numbers, got {len(embedding)}"
        )
    values = []
    for x in embedding:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise UserError(f"an embedding holds finite numbers only, got {x!r}")
        values.append(float(x))
    return tuple(values)


@dataclass(frozen=True, slots=True)
class NewFact:
    """What a store keeps for a fact it is given, checked (`new_fact`)."""

    scope: str
    text: str
    key: str
    embedding: tuple[float, ...] | None
    embedder: str | None
    session_id: str | None
    run_id: str | None


class FactOrigin(TypedDict, total=False):
    """Where a fact came from, as `MemoryStore.remember_fact` takes it (all optional)."""

    session_id: str | None
    run_id: str | None
    embedding: Sequence[float] | None
    """The fact's vector, from `embedder` (the two go together)."""
    embedder: str | None


def new_fact(scope: str, text: str, origin: Mapping[str, Any]) -> NewFact:
    """The checks every `MemoryStore.remember_fact` makes, one rule for all stores:
    UserError for a bad scope, text, embedding, id or keyword (`origin`: `FactOrigin`)."""
    check_keywords("remember_fact", FactOrigin, origin)
    session_id, run_id = origin.get("session_id"), origin.get("run_id")
    embedding, embedder = origin.get("embedding"), origin.get("embedder")
    check_scope(scope)
    text = clean_fact(text)
    vector = check_embedding(embedding)
    if (vector is None) != (embedder is None):
        raise UserError("an embedding and the name of its embedder go together")
    for what, value in (("session_id", session_id), ("run_id", run_id), ("embedder", embedder)):
        if value is not None:
            check_name(what, value)
    return NewFact(
        scope=scope,
        text=text,
        key=fact_key(text),
        embedding=vector,
        embedder=embedder,
        session_id=session_id,
        run_id=run_id,
    )


def check_limit(limit: object) -> int:
    """`limit` if it is a positive integer (how many facts to list), else UserError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UserError(f"limit must be a positive integer, got {limit!r}")
    return limit


@runtime_checkable
class MemoryStore(Protocol):
    """Where long-term facts live, per scope. Every method is one transaction.

    Scopes never mix: no method reads or changes a fact of a scope it was not given.
    """

    def remember_fact(
        self,
        scope: str,
        text: str,
        **origin: Unpack[FactOrigin],
    ) -> tuple[Fact, bool]:
        """Keep `text` (cleaned: `clean_fact`) as a fact of `scope`.

        Returns the fact and whether it is new: a fact with the same `fact_key` in the
        scope is returned as it was kept (False), whoever wrote it. UserError for a bad
        scope, text or embedding.
        """
        ...

    def list_facts(self, scope: str, *, limit: int = RECALL_WINDOW) -> list[Fact]:
        """The newest `limit` facts of `scope`, newest first."""
        ...

    def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete a fact of `scope`; False when the scope has no fact of that id."""
        ...
