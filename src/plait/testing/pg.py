"""A PostgreSQL + pgvector server for tests and benchmarks: the one in the ``pgserver``
wheel, or the one ``PLAIT_PG_DSN`` names.

The data folder is a fresh ``mkdtemp`` folder, not pytest's ``tmp_path``: the server
runs as another user (when run as root), which cannot enter pytest's 0700 base folder,
and pytest prunes old base folders under concurrent runs.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.config import Settings

if TYPE_CHECKING:
    from plait.stores.postgres import PostgresStore

__all__ = ["ensure_server_user", "postgres_dsn", "private_postgres", "store_opener", "streaming_standby", "system_tool", "throwaway_schema"]


def system_tool(name: str) -> str:
    """The path of an administration command (``useradd``, ``userdel``): on ``PATH``, else in
    ``/usr/sbin`` or ``/sbin``, which a plain user's ``PATH`` (and ``env -i``) leaves out."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(("/usr/sbin", "/sbin")))
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (looked on PATH, in /usr/sbin and /sbin)")
    return found


#: The system user ``pgserver`` runs the server as when started by root.
SERVER_USER = "pgserver"
#: The lock every process creating that user takes first.
SERVER_USER_LOCK = Path(tempfile.gettempdir()) / "plait-pgserver-user.lock"


def ensure_server_user(name: str = SERVER_USER) -> None:
    """Create ``pgserver``'s system user (``name``), once, under a lock, when running as root.

    ``pgserver`` creates it itself, but outside its lock: two processes starting their
    first servers at once on a fresh machine (two test workers) both ran ``useradd``,
    and one's ``initdb`` then failed ("could not change permissions of directory"):
    one or two of a parallel run's PostgreSQL test modules errored at setup."""
    if os.geteuid() != 0:
        return
    with SERVER_USER_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run([system_tool("useradd"), "-s", "/bin/bash", name], check=True, capture_output=True, text=True)


@contextmanager
def private_postgres(prefix: str = "plait-pg-") -> Iterator[str]:
    """Start a private server (``pgserver``) in a new temporary folder; yield its URI;
    stop it and delete the folder afterwards."""
    import pgserver

    ensure_server_user()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    start = pgserver.get_server  # type: ignore[attr-defined]  # exported without __all__
    server = start(root / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_dsn(prefix: str = "plait-pg-") -> Iterator[str]:
    """``PLAIT_PG_DSN`` when it is set, else :func:`private_postgres`."""
    configured = Settings.resolve().pg_dsn
    if configured:
        yield configured
        return
    with private_postgres(prefix) as dsn:
        yield dsn


@contextmanager
def throwaway_schema(dsn: str, prefix: str = "plait_t_") -> Iterator[str]:
    """A new schema name (``prefix`` + 12 hex digits) for one test; the schema, and
    everything a store created in it, is dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def store_opener(dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    """A factory of :class:`~plait.stores.postgres.PostgresStore` on ``dsn`` and ``schema``
    (its keyword arguments passed on); every store it opened is closed afterwards."""
    from plait.stores.postgres import PostgresStore

    opened: list[PostgresStore] = []

    def make(**kwargs: Any) -> PostgresStore:
        store = PostgresStore(dsn, schema=schema, **kwargs)
        opened.append(store)
        return store

    try:
        yield make
    finally:
        for store in opened:
            store.close()


@contextmanager
def streaming_standby(primary_dsn: str) -> Iterator[str]:
    """A physical streaming replica (hot standby) of a local ``pgserver`` primary reached
    through its Unix socket: ``pg_basebackup -R`` into a new folder, started by ``pg_ctl``
    with its own socket there; yield its URI; stop it and delete the folder afterwards.
    Run as the ``pgserver`` system user when run as root (as ``pgserver`` runs the primary)."""
    import os
    import pwd
    import subprocess

    import psycopg
    from pgserver._commands import POSTGRES_BIN_PATH
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    host = str(conninfo_to_dict(primary_dsn).get("host", ""))
    if not host.startswith("/"):
        raise RuntimeError("streaming_standby needs a primary reached through its Unix socket")
    user = "pgserver" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="plait-pg-standby-"))
    data = root / "data"
    data.mkdir(mode=0o700)
    if user is not None:
        entry = pwd.getpwnam(user)
        for folder in (root, data):
            os.chown(folder, entry.pw_uid, entry.pw_gid)
    bin_path = Path(POSTGRES_BIN_PATH)

    def run(*args: str) -> None:
        subprocess.run([str(bin_path / args[0]), *args[1:]], check=True, user=user, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    started = False
    try:
        run("pg_basebackup", "-h", host, "-U", "postgres", "-D", str(data), "-R", "-X", "stream", "-c", "fast")
        for copied in data.glob(".s.PGSQL.*"):  # the primary's socket lock, copied with its folder
            copied.unlink()
        options = f"-c port=5432 -c listen_addresses='' -c unix_socket_directories='{data}' -c hot_standby=on"
        run("pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(root / "log"), "-o", options, "start")
        started = True
        dsn = make_conninfo(primary_dsn, host=str(data))
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        if row is None or not row[0]:
            raise RuntimeError("the standby is not in recovery")
        yield dsn
    finally:
        if started:
            run("pg_ctl", "-D", str(data), "-w", "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
