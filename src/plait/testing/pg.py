"""A PostgreSQL + pgvector server for tests and benchmarks: the one in the ``pgserver``
wheel, or the one ``PLAIT_PG_DSN`` names.

The data folder is a fresh ``mkdtemp`` folder, not pytest's ``tmp_path``: the server
runs as another user (when run as root), which cannot enter pytest's 0700 base folder,
and pytest prunes old base folders under concurrent runs.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from plait.config import Settings

__all__ = ["postgres_dsn", "private_postgres", "throwaway_schema"]


@contextmanager
def private_postgres(prefix: str = "plait-pg-") -> Iterator[str]:
    """Start a private server (``pgserver``) in a new temporary folder; yield its URI;
    stop it and delete the folder afterwards."""
    import pgserver

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
