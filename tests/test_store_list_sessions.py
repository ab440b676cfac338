"""`Store.list_sessions`: a tenant's sessions, newest first, a page at a time, on SQLite
and PostgreSQL (the trace viewer's session list)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from durable_support import *  # noqa: F403  (the store fixtures)
from pi_runtime.durable import NotFound, Store
from pi_runtime.durable import schema as t
from pi_runtime.exceptions import UserError


def ids(store: Store, prefix: str = "", limit: int = 50, after: str | None = None) -> list[str]:
    return [s.id for s in store.list_sessions(prefix=prefix, limit=limit, after=after)]


def test_sessions_are_listed_newest_first(store: Store) -> None:
    for sid in ("first", "second", "third"):
        store.create_session(sid)
    assert ids(store) == ["third", "second", "first"]
    listed = store.list_sessions()[0]
    assert (listed.status, listed.message_count) == ("idle", 0)


def test_a_tenant_sees_only_its_own_sessions(store: Store) -> None:
    for sid in ("plain", "acme/s1", "acme/s2", "zeta/s1", "acme/deeper/s3", "acmex/s4"):
        store.create_session(sid)
    assert ids(store, prefix="acme/") == ["acme/s2", "acme/s1"]
    assert ids(store, prefix="zeta/") == ["zeta/s1"]
    assert ids(store) == ["plain"]  # no tenant: never a namespaced session
    assert ids(store, prefix="nobody/") == []


def test_a_tenant_differing_only_in_case_sees_none_of_the_others(store: Store) -> None:
    # SQLite's LIKE ignores ASCII case: `acme/` matched `ACME/…` there
    for sid in ("ACME/secret", "acme/mine", "Acme/other", "ACMÉ/x"):
        store.create_session(sid)
    assert ids(store, prefix="acme/") == ["acme/mine"]
    assert ids(store, prefix="ACME/") == ["ACME/secret"]
    assert ids(store, prefix="ACMÉ/") == ["ACMÉ/x"]
    with pytest.raises(NotFound):
        ids(store, prefix="acme/", after="ACME/secret")


def test_a_prefix_within_a_namespace_lists_its_ids_that_start_with_it(store: Store) -> None:
    for sid in ("acme/s1", "acme/s2", "acme/t1", "acme/s3/deeper", "ACME/s9", "acme/S4", "s5"):
        store.create_session(sid)
    assert ids(store, prefix="acme/s") == ["acme/s2", "acme/s1"]
    assert ids(store, prefix="acme/s3") == []  # its only id is in a namespace below
    assert ids(store, prefix="s") == ["s5"]
    assert ids(store, prefix="acme/s", after="acme/s2") == ["acme/s1"]
    with pytest.raises(NotFound):  # in the namespace, but not a page of this prefix
        ids(store, prefix="acme/s", after="acme/t1")


def test_like_wildcards_in_a_prefix_match_only_themselves(store: Store) -> None:
    # `_` and `%` are LIKE wildcards: unescaped, tenant `a_b` would see `axb`'s sessions.
    for sid in ("a_b/mine", "axb/theirs", "a%c/mine", "abbc/theirs"):
        store.create_session(sid)
    assert ids(store, prefix="a_b/") == ["a_b/mine"]
    assert ids(store, prefix="a%c/") == ["a%c/mine"]


def test_pages_follow_each_other_without_gaps_or_repeats(store: Store) -> None:
    made = [f"acme/s{i:02d}" for i in range(7)]
    for sid in made:
        store.create_session(sid)
    store.create_session("zeta/s99")
    seen: list[str] = []
    after = None
    while True:
        page = ids(store, prefix="acme/", limit=3, after=after)
        seen += page
        if len(page) < 3:
            break
        after = page[-1]
    assert seen == made[::-1]


def test_sessions_made_at_the_same_instant_page_by_id(
    store_factory: Callable[..., Store],
) -> None:
    instant = datetime(2031, 5, 1, tzinfo=UTC)
    store = store_factory(clock=lambda: instant)
    for sid in ("b", "d", "a", "c"):
        store.create_session(sid)
    first = ids(store, limit=2)
    assert first == ["d", "c"]
    assert ids(store, limit=2, after=first[-1]) == ["b", "a"]


def test_a_page_after_an_unknown_or_foreign_session_is_refused(store: Store) -> None:
    store.create_session("acme/s1")
    store.create_session("zeta/s1")
    with pytest.raises(NotFound):
        store.list_sessions(prefix="acme/", after="acme/nope")
    with pytest.raises(NotFound):  # another tenant's id is no cursor of acme's
        store.list_sessions(prefix="acme/", after="zeta/s1")


@pytest.mark.parametrize("limit", [0, -1, 501])
def test_a_page_size_out_of_bounds_is_refused(store: Store, limit: int) -> None:
    with pytest.raises(UserError, match="1 to 500"):
        store.list_sessions(limit=limit)


@pytest.mark.parametrize("prefix", ["", "acme/", "acme/s"])
def test_the_newest_first_page_reads_an_index_instead_of_sorting_every_session(
    store: Store, db_url: str, prefix: str
) -> None:
    # 200,000 sessions took ~140 ms a page to sort whole on SQLite; ~1 ms through the index
    for sid in ("acme/s1", "acme/s2", "zeta/s1", "plain"):
        store.create_session(sid)
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    engine = store._engine  # type: ignore[attr-defined]
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        store.list_sessions(prefix=prefix)
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    (statement, params), *_ = [(st, p) for st, p in sent if "FROM sessions" in st]
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = " ".join(
                str(row[-1])
                for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
            )
            assert "ix_sessions_namespace" in plan and "TEMP B-TREE" not in plan, plan
        else:  # its plans: tests/test_store_pg_plans.py
            columns = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_sessions_namespace' "
                "AND schemaname = current_schema()"
            ).scalar_one()
            assert "rtrim(id, replace(id, '/'::text, ''::text)), created_at, id" in columns


def test_the_indexed_namespace_of_an_id_is_the_one_a_page_asks_for(store: Store) -> None:
    # the index's SQL expression and the Python the page is asked with must agree, on
    # each backend, for every shape of id (else a page silently misses sessions)
    made = ["plain", "a/b", "a/b/c", "a/", "/lead", "x//y", "ü/ß/é", "a%b/_c", "t/\\z", "é"]
    for sid in made:
        store.create_session(sid)
    engine = store._engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.sessions.c.id, t.namespace_of(t.sessions.c.id)))
        found = {row[0]: row[1] for row in rows}
    assert found == {sid: sid[: sid.rfind("/") + 1] for sid in made}
    for sid in made:  # and each is listed in its namespace's page
        namespace = sid[: sid.rfind("/") + 1]
        assert sid in ids(store, prefix=namespace)
