"""A throwaway PostgreSQL server for benchmarks and demos: its own data folder in a temp
directory, listening on 127.0.0.1 at a free port, durability off, removed on `stop()`.

    with TempPostgres() as pg:
        url = pg.url(schema=pg.create_schema())   # a fresh, empty database in milliseconds

Needs the PostgreSQL server binaries (`initdb`, `pg_ctl`) under /usr/lib/postgresql/*/bin
or on PATH. PostgreSQL refuses to run as root: as root the server runs as the system
user `pi-pg` (created if missing).

It lives in `bench`, not `durable`, because it may run `useradd` as root and start a
server: support for benchmarks and Pi's own tests (`tests/durable_support.py`), never
something the runtime does. No runtime module imports it (tests/test_layers.py: `bench`
sits above everything the runtime is made of).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from ..exceptions import UserError

SYSTEM_USER = "pi-pg"
SUPERUSER = "postgres"


def server_bin_dir() -> Path | None:
    """Where `initdb` and `pg_ctl` are (the newest installed version), or None."""
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


class TempPostgres:
    """A private PostgreSQL server, started by `start()` (or `with`)."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        found = bin_dir or server_bin_dir()
        if found is None:
            raise UserError(
                "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on "
                "PATH): apt-get install postgresql, or give a server's URL"
            )
        self.bin_dir = found
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="pi-pg-"))
        self._names = itertools.count()
        self.running = False

    def __enter__(self) -> TempPostgres:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SYSTEM_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=self.root)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise UserError(f"{args[0]} failed ({done.returncode}): {done.stderr}{tail}")

    def start(self) -> None:
        sockets = self.root / "sockets"
        sockets.mkdir()
        if os.geteuid() == 0:
            _ensure_system_user()
            user = pwd.getpwnam(SYSTEM_USER)
            for path in (self.root, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
        data = str(self.root / "data")
        try:
            self._run("initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                      "--locale=C", "--no-sync")  # fmt: skip
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {sockets} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=300"
            )
            self._run("pg_ctl", "-D", data, "-l", str(self.root / "server.log"), "-w",
                      "-t", "60", "-o", options, "start")  # fmt: skip
        except UserError:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.running = False
            try:
                self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
            finally:
                shutil.rmtree(self.root, ignore_errors=True)

    def url(self, schema: str | None = None) -> str:
        """The server's URL; with `schema`, every connection works inside that schema."""
        return with_schema(f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres", schema)

    def create_schema(self) -> str:
        """A new empty schema: a fresh database for one use."""
        name = f"pi_tmp_{next(self._names)}"
        admin(self.url(), f'CREATE SCHEMA "{name}"')
        return name


def with_schema(url: str, schema: str | None) -> str:
    """`url` whose connections use `schema` (PostgreSQL's search_path)."""
    if schema is None:
        return url
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}"


def connect(url: str) -> Any:
    """A psycopg connection to `url`, in its schema (`with_schema`), in autocommit:
    transactions are explicit (`conn.transaction()`)."""
    import psycopg
    from sqlalchemy import make_url

    parsed = make_url(url)
    return psycopg.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        dbname=parsed.database,
        options=parsed.query.get("options"),  # type: ignore[arg-type]
        autocommit=True,
    )


def admin(url: str, sql: str) -> Any:
    """Run one statement outside a transaction (CREATE/DROP SCHEMA, SHOW); the first
    value of its first row, if it returns one."""
    with connect(url) as conn:
        cursor = conn.execute(sql)
        row = cursor.fetchone() if cursor.description else None
        return None if row is None else row[0]


def _ensure_system_user() -> None:
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
             "--user-group", SYSTEM_USER],
            check=True, capture_output=True,
        )  # fmt: skip
