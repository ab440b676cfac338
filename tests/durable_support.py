"""Stores on real databases for the tests: SQLite in a temp folder, PostgreSQL in a
throwaway cluster started once per test session (127.0.0.1, a free port, a temp data dir).

Use from a test module (a star import, so linters see no shadowed names):

    from durable_support import *  # noqa: F403

`store` is parametrised over `sqlite` and `postgresql`; each test gets a fresh database.
PostgreSQL must be installed (its binaries under /usr/lib/postgresql/*/bin or on PATH):
a missing server fails loudly. `PI_TEST_NO_POSTGRES=1` skips the PostgreSQL cases instead.
PostgreSQL refuses to run as root, so as root the cluster runs as the system user `pi-pg`
(created if missing).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pi_runtime.bench.pgtemp import SUPERUSER, TempPostgres, admin, server_bin_dir, with_schema
from pi_runtime.durable import Store, open_store

__all__ = [
    "BACKENDS",
    "FakeClock",
    "PgCluster",
    "clock",
    "db_url",
    "pg_cluster",
    "shared_cluster",
    "store",
    "store_factory",
]

NO_POSTGRES_ENV = "PI_TEST_NO_POSTGRES"
BACKENDS = ["sqlite", "postgresql"]


class PgCluster(TempPostgres):
    """The tests' server (see `pi_runtime.bench.pgtemp`): one per test session, with a
    fresh database or schema for each test."""

    def __init__(self, bin_dir: Path) -> None:
        super().__init__(bin_dir)
        self._count = itertools.count()
        self._lock = threading.Lock()

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        """A URL of the cluster; with `schema`, every connection works inside it."""
        return with_schema(f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}", schema)

    def _new_name(self) -> str:
        with self._lock:
            return f"pi_test_{next(self._count)}"

    def create_database(self) -> str:
        name = self._new_name()
        admin(self.url(), f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        admin(self.url(), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def create_schema(self) -> str:
        """An empty schema in the `postgres` database: a fresh database for one test,
        made in milliseconds (CREATE DATABASE takes a few hundred)."""
        name = self._new_name()
        admin(self.url(), f'CREATE SCHEMA "{name}"')
        return name

    def drop_schema(self, name: str) -> None:
        admin(self.url(), f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


_shared: PgCluster | None = None
_shared_lock = threading.Lock()


def shared_cluster() -> PgCluster:
    """The session's cluster, started on first use (one per process, whoever asks)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            bin_dir = server_bin_dir()
            if bin_dir is None:
                pytest.fail(
                    "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin "
                    "or on PATH): install it (apt-get install postgresql) or set "
                    f"{NO_POSTGRES_ENV}=1 to skip the PostgreSQL cases",
                    pytrace=False,
                )
            cluster = PgCluster(bin_dir)
            try:
                cluster.start()
            except Exception:
                shutil.rmtree(cluster.root, ignore_errors=True)
                raise
            atexit.register(cluster.stop)  # also when the session ends abnormally
            _shared = cluster
        return _shared


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    if os.environ.get(NO_POSTGRES_ENV) == "1":
        pytest.skip(f"{NO_POSTGRES_ENV}=1: PostgreSQL cases skipped")
    cluster = shared_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database's URL: a SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'pi.db'}"
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = cluster.create_schema()
    yield cluster.url(schema=name)
    cluster.drop_schema(name)


class FakeClock:
    """A clock the test moves by hand, so lease expiry needs no sleeping.

    Each reading ticks one microsecond, like a real clock, so rows written one after
    another keep their order.
    """

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(microseconds=1)
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store_factory(db_url: str, clock: FakeClock) -> Iterator[Callable[..., Store]]:
    """Opens stores on the test's database (each its own engine and connections)."""
    opened: list[Store] = []

    def open_more(**options: Any) -> Store:
        options.setdefault("clock", clock)
        opened.append(open_store(db_url, **options))
        return opened[-1]

    yield open_more
    for one in opened:
        one.close()


@pytest.fixture
def store(store_factory: Callable[..., Store]) -> Store:
    """A migrated store on a fresh database, its clock the test's `clock`."""
    return store_factory()
