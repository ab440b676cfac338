"""Job-queue operations of the durable store on SQLite and PostgreSQL: releasing a lease,
enqueueing fenced by the run's lease, cancelling one job, claiming any work at once, and
surviving a dropped connection."""

from __future__ import annotations

import pytest

from durable_support import *  # noqa: F403  (the store fixtures)
from durable_support import PgCluster
from pi_runtime.bench.pgtemp import admin
from pi_runtime.durable import Store


def test_a_connection_the_server_dropped_is_replaced_without_an_error(
    store: Store, pg_cluster: PgCluster, db_url: str
) -> None:
    if store.backend != "postgresql":
        pytest.skip("SQLite has no server to drop connections")
    session = store.create_session("s1")
    assert store.get_session(session.id) is not None  # a pooled connection now exists
    admin(
        pg_cluster.url(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database() "
        "AND backend_type = 'client backend'",
    )
    assert store.get_session(session.id) == store.get_session(session.id)
    store.create_session("s2")
