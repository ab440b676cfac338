"""Long-term facts (memory L3): kept per scope, one per fact key, newest first.

The cleaning and the identity of a fact are the memory layer's (`pi_runtime.memory.
facts`): the store applies them itself, so a fact is the same whichever process wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from ..memory.facts import Fact, check_limit, check_scope, new_fact
from . import schema as t
from ._tx import Tx, new_id


def remember_fact(tx: Tx, scope: str, text: str, origin: Mapping[str, Any]) -> tuple[Fact, bool]:
    new = new_fact(scope, text, origin)
    key = new.key
    values: dict[str, Any] = {
        "id": new_id("fact"),
        "scope": scope,
        "key": key,
        "text": new.text,
        "session_id": new.session_id,
        "run_id": new.run_id,
        "embedder": new.embedder,
        "embedding": None if new.embedding is None else list(new.embedding),
        "created_at": tx.now,
    }
    # a fact already kept (by anyone, at any moment) wins: nothing is written twice
    dialect = postgresql if tx.conn.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(t.memory_facts).values(**values)
    tx.conn.execute(insert.on_conflict_do_nothing(index_elements=["scope", "key"]))
    row = tx.conn.execute(
        select(t.memory_facts).where(t.memory_facts.c.scope == scope, t.memory_facts.c.key == key)
    ).one()
    return _fact(row), row.id == values["id"]


def list_facts(tx: Tx, scope: str, limit: int) -> list[Fact]:
    check_scope(scope)
    check_limit(limit)
    c = t.memory_facts.c
    query = (
        select(t.memory_facts)
        .where(c.scope == scope)
        .order_by(c.created_at.desc(), c.id.desc())
        .limit(limit)
    )
    return [_fact(row) for row in tx.conn.execute(query)]


def forget_fact(tx: Tx, scope: str, fact_id: str) -> bool:
    check_scope(scope)
    c = t.memory_facts.c
    gone = tx.conn.execute(delete(t.memory_facts).where(c.scope == scope, c.id == fact_id))
    return bool(gone.rowcount)


def _fact(row: Any) -> Fact:
    return Fact(
        id=row.id,
        scope=row.scope,
        text=row.text,
        created_at=row.created_at,
        session_id=row.session_id,
        run_id=row.run_id,
        embedding=None if row.embedding is None else tuple(row.embedding),
        embedder=row.embedder,
    )
