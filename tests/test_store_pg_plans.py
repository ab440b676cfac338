"""A claim's look, and a page of sessions, read indexes however much history the store
holds.

psycopg prepares a statement after its fifth run, and PostgreSQL then plans it once for
any parameters (a generic plan). A status bound as a parameter reads there as "some
status": with 100,000 finished runs the look before each claim read the whole table
(32 ms, where the job it claimed cost 10). The claim statements write their statuses in,
so even their generic plans know `status = 'queued'` is rare and read the index. Here
each is planned as a prepared statement would be after its fifth run, on a store whose
rows are nearly all finished.

A page of sessions is a namespace's newest (a tenant's, or those of no tenant). Found by
tests of the ids, PostgreSQL read and sorted the whole table for the page of no tenant
(34 ms over 100,000 sessions), and a tenant's page read every newer session of every
other tenant where the database's collation is not C (13.5 ms). An index of each id's
namespace, then creation time, reads just the page. (Its parameter is the namespace
itself: PostgreSQL keeps planning it per call while a generic plan would cost more.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg import sql
from sqlalchemy import Select, event

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import PgCluster
from pi_runtime.durable import _claims, _jobs, _runs, open_store
from pi_runtime.durable._stmts import fixed
from pi_runtime.durable.store import Store

HISTORY = 20_000
_FILL = (
    "INSERT INTO sessions (id, status, version, message_count, created_at, updated_at)"
    " SELECT 'h' || g, 'completed', 3, 2, now(), now() FROM generate_series(1, {n}) g",
    "INSERT INTO runs (id, session_id, kind, status, stop_reason, attempts, created_at)"
    " SELECT 'hr' || g, 'h' || g, 'user', 'completed', 'final_answer', 1, now()"
    " FROM generate_series(1, {n}) g",
    "INSERT INTO jobs (id, session_id, tool_call_id, tool, arguments, status, retry_safe,"
    " max_attempts, attempts, created_at, updated_at)"
    " SELECT 'hj' || g, 'h' || g, 'c' || g, 'noop', '{{}}', 'succeeded', true, 3, 1, now(),"
    " now() FROM generate_series(1, {n}) g",
)


@pytest.fixture
def store(pg_cluster: PgCluster) -> Iterator[Store]:
    name = pg_cluster.create_schema()
    opened = open_store(pg_cluster.url(schema=name))
    try:
        with opened._engine.connect() as conn:  # type: ignore[attr-defined]
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.autocommit = True
            try:
                with raw.cursor() as cur:
                    for statement in _FILL:
                        cur.execute(statement.format(n=HISTORY))
                    cur.execute("ANALYZE")
            finally:
                raw.autocommit = False  # as the pool hands connections out
        yield opened
    finally:
        opened.close()
        pg_cluster.drop_schema(name)


def _generic_plan(store: Store, stmt: Select[Any], params: dict[str, Any]) -> str:
    """The plan PostgreSQL gives `stmt` prepared, for any parameters (as after its fifth
    run through psycopg), shown for `params`."""
    compiled = stmt.compile(dialect=store._engine.dialect)  # type: ignore[attr-defined]
    return _generic_plan_of(store, str(compiled), compiled.construct_params(params))


def _generic_plan_of(store: Store, statement: str, values: dict[str, Any]) -> str:
    """`_generic_plan` of a statement as the driver is sent it (`%(name)s` parameters)."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    text = re.sub(r"%\((\w+)\)s", numbered, statement).replace("%%", "%")
    with store._engine.connect() as conn:  # type: ignore[attr-defined]
        raw = conn.connection.dbapi_connection
        with raw.cursor() as cur:
            cur.execute("SET plan_cache_mode = force_generic_plan")
            cur.execute(sql.SQL("PREPARE look AS {}").format(sql.SQL(text)))  # type: ignore[arg-type]
            args = sql.SQL(", ").join(sql.Literal(values[name]) for name in names)
            cur.execute(sql.SQL("EXPLAIN EXECUTE look({})").format(args))
            plan = "\n".join(row[0] for row in cur.fetchall())
            cur.execute("DEALLOCATE look")
            cur.execute("RESET plan_cache_mode")
        conn.rollback()
    return plan


def _reads_whole(plan: str) -> list[str]:
    return re.findall(r"Seq Scan on (runs|jobs)\b", plan)


def test_the_look_before_a_claim_reads_no_whole_table(store: Store) -> None:
    plan = _generic_plan(store, _claims._KINDS, {"now": datetime.now(UTC)})
    assert "'queued'" in plan  # the status is in the plan, not a parameter
    assert _reads_whole(plan) == [], plan


@pytest.mark.parametrize("claim", [_jobs._CLAIM, _runs._CLAIM], ids=["jobs", "runs"])
def test_a_claims_pick_reads_no_whole_table(store: Store, claim: Any) -> None:
    plan = _generic_plan(store, claim.pick[True], {"now": datetime.now(UTC), "limit": 4})
    assert _reads_whole(plan) == [], plan


def test_the_store_still_claims_what_is_queued_among_the_history(store: Store) -> None:
    store.create_session("live")
    job = store.enqueue_job("noop", {}, session_id="live", tool_call_id="call-1")
    claimed = store.claim_batch(["w/0"], lease_s=5.0, max_attempts=3)
    assert [getattr(work, "id", None) for work in claimed] == [job.id]
    assert store.claim_batch(["w/0"], lease_s=5.0, max_attempts=3) == []


def test_fixed_writes_only_plain_words() -> None:
    assert str(fixed("queued")) == "'queued'"
    for bad in ("it's", "queued'; DROP TABLE jobs; --", "Queued", "", "a b"):
        with pytest.raises(ValueError, match="not a lowercase word"):
            fixed(bad)


def _custom_plan(store: Store, statement: str, params: dict[str, Any]) -> str:
    """The plan PostgreSQL gives `statement` run once with `params` (its first runs)."""
    engine = store._engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        with raw.cursor() as cur:
            cur.execute("EXPLAIN " + statement, params, prepare=False)
            plan = "\n".join(row[0] for row in cur.fetchall())
        conn.rollback()
    return plan


@pytest.mark.parametrize("prefix", ["", "live/", "live/s"], ids=["root", "tenant", "within"])
def test_a_page_of_sessions_reads_just_the_page(store: Store, prefix: str) -> None:
    namespace = prefix[: prefix.rfind("/") + 1]
    for n in range(60):
        store.create_session(f"{namespace}s{n:02d}")
    sent: list[tuple[str, dict[str, Any]]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    event.listen(store._engine, "before_cursor_execute", record)  # type: ignore[attr-defined]
    try:
        page = store.list_sessions(prefix=prefix, limit=50)
    finally:
        event.remove(store._engine, "before_cursor_execute", record)  # type: ignore[attr-defined]
    assert [s.id for s in page] == [f"{namespace}s{n:02d}" for n in range(59, 9, -1)]
    (statement, params), *_ = [(st, p) for st, p in sent if "FROM sessions" in st]
    plan = _custom_plan(store, statement, params)
    # the newest sessions of the namespace, in order from an index: no sort, no table read
    assert "Sort" not in plan and "Seq Scan on sessions" not in plan, plan
    if namespace:  # a tenant among 20,000 sessions of no tenant: its own index entries
        assert "ix_sessions_namespace" in plan, plan
