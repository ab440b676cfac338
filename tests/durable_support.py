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
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

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
PG_SYSTEM_USER = "pi-pg"
PG_SUPERUSER = "postgres"
BACKENDS = ["sqlite", "postgresql"]


def _pg_bin_dir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgCluster:
    """A PostgreSQL server of its own, for one test session."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="pi-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self._names = itertools.count()
        self._lock = threading.Lock()
        self.running = False

    def _as_server_user(self, args: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return args
        return ["runuser", "-u", PG_SYSTEM_USER, "--", *args]

    def _run(self, *args: str) -> None:
        command = self._as_server_user([str(self.bin_dir / args[0]), *args[1:]])
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def start(self) -> None:
        self.sockets.mkdir()
        if os.geteuid() == 0:
            _ensure_system_user()
            user = pwd.getpwnam(PG_SYSTEM_USER)
            for path in (self.root, self.sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", PG_SUPERUSER, "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sockets} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=300"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", options, "start")  # fmt: skip
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.running = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            finally:
                shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        """A URL of the cluster; with `schema`, every connection works inside it."""
        url = f"postgresql://{PG_SUPERUSER}@127.0.0.1:{self.port}/{database}"
        return url if schema is None else f"{url}?options=-csearch_path%3D{schema}"

    def _admin(self, sql: str) -> None:
        import psycopg

        dsn = f"host=127.0.0.1 port={self.port} user={PG_SUPERUSER} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def _new_name(self) -> str:
        with self._lock:
            return f"pi_test_{next(self._names)}"

    def create_database(self) -> str:
        name = self._new_name()
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def create_schema(self) -> str:
        """An empty schema in the `postgres` database: a fresh database for one test,
        made in milliseconds (CREATE DATABASE takes a few hundred)."""
        name = self._new_name()
        self._admin(f'CREATE SCHEMA "{name}"')
        return name

    def drop_schema(self, name: str) -> None:
        self._admin(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _ensure_system_user() -> None:
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
             "--user-group", PG_SYSTEM_USER],
            check=True, capture_output=True,
        )  # fmt: skip


_shared: PgCluster | None = None
_shared_lock = threading.Lock()


def shared_cluster() -> PgCluster:
    """The session's cluster, started on first use (one per process, whoever asks)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            bin_dir = _pg_bin_dir()
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
