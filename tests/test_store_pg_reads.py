"""PostgreSQL reads run outside a transaction where that changes nothing they see.

At READ COMMITTED each statement sees what was committed when it starts, in a
transaction or not, so a read without one is the same read two round trips cheaper
(BEGIN and COMMIT). The connection goes back to the pool transactional: a write that
reuses it still runs in one transaction. A server set to a stricter level keeps its
reads in transactions (their statements then share one snapshot).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import PgCluster
from pi_runtime.durable import open_store
from pi_runtime.durable.store import Store


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    name = pg_cluster.create_schema()
    yield pg_cluster.url(schema=name)
    pg_cluster.drop_schema(name)


def _watched(store: Store) -> list[tuple[str, bool, int]]:
    """(first word, in autocommit, connection id) of each statement `store` sends."""
    seen: list[tuple[str, bool, int]] = []

    def record(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        dbapi = cursor.connection
        seen.append((statement.split()[0].upper(), dbapi.autocommit, id(dbapi)))

    event.listen(store._engine, "before_cursor_execute", record)  # type: ignore[attr-defined]
    return seen


def test_a_read_sends_no_begin_and_the_next_write_on_its_connection_is_a_transaction(
    pg_url: str,
) -> None:
    store = open_store(pg_url, pool_size=1)
    try:
        seen = _watched(store)
        store.create_session("s1")
        wrote = list(seen)
        seen.clear()
        assert store.get_session("s1") is not None
        read = list(seen)
        seen.clear()
        store.create_session("s2")
        wrote_again = list(seen)
    finally:
        store.close()
    assert wrote and all(not autocommit for _, autocommit, _ in wrote)
    assert read and all(autocommit for _, autocommit, _ in read)
    assert {word for word, _, _ in read} == {"SELECT"}
    # the same pooled connection, back in transactions for the write
    assert {conn for *_, conn in read} == {conn for *_, conn in wrote_again}
    assert wrote_again and all(not autocommit for _, autocommit, _ in wrote_again)


def test_a_server_set_to_a_stricter_level_keeps_reads_in_transactions(pg_url: str) -> None:
    strict = pg_url + "%20-cdefault_transaction_isolation%3Dserializable"
    store = open_store(strict)
    try:
        seen = _watched(store)
        store.create_session("s1")
        seen.clear()
        assert store.get_session("s1") is not None
        assert store.load_messages("s1") == []
    finally:
        store.close()
    assert seen and all(not autocommit for _, autocommit, _ in seen)
