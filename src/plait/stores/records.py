"""Small record tables kept in the store itself: refinery runs and FAQ cards, API keys.

Every backend answers :meth:`~plait.stores.base.Store.records` with a :class:`Records`:
a handle on three tables in the store's own database, so that two servers on one
PostgreSQL database share cards and keys, and a SQLite store is still one file.

* SQLite — tables ``refinery_runs``, ``refinery_cards``, ``api_keys`` in the store file
  (migration 5 of :mod:`plait.stores.sqlite_schema`), on the store's own connection.
* PostgreSQL — ``plait_refinery_runs``, ``plait_refinery_cards``, ``plait_api_keys``
  (migration 6 of :mod:`plait.stores.postgres_schema`), on the store's pool.
* Milvus — Milvus has no transactions (the refinery's "one active run per collection"
  needs one), so the tables live in a small SQLite *sidecar* file: ``<path>.records.sqlite``
  next to a milvus-lite ``.db``, or ``?records=PATH`` on a server URL (default
  ``./.plait/milvus-<host>-<port>-<prefix>.records.sqlite``). Two servers on one Milvus
  cluster share cards and keys only when they point ``records=`` at one shared file.

A stand-alone file (``KeyStore(path)``, ``RefineryStore(path)``, the sidecar) uses the
layout of the former ``keys.db`` / ``refinery.db`` files (tables ``runs``, ``cards``,
``api_keys``), so such files open unchanged. The former side files next to a store are
imported into the store the first time its records are opened
(:mod:`plait.stores.records_import`).

SQL is written once, with ``?`` placeholders and ``{runs}`` / ``{cards}`` / ``{keys}`` /
``{seq}`` table and ordering names that each backend fills in.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from plait.errors import StoreError

__all__ = [
    "FILE_TABLES",
    "SQLITE_STORE_TABLES",
    "Records",
    "RecordsTx",
    "SqliteRecords",
    "Tables",
    "open_records_file",
    "sqlite_records_ddl",
]


@dataclass(frozen=True, slots=True)
class Tables:
    """Physical names of the record tables, and the column that orders rows by insertion."""

    runs: str
    cards: str
    keys: str
    imports: str
    seq: str = "rowid"
    dialect: str = "sqlite"

    def sql(self, template: str) -> str:
        return template.format(runs=self.runs, cards=self.cards, keys=self.keys, imports=self.imports, seq=self.seq)


FILE_TABLES = Tables(runs="runs", cards="cards", keys="api_keys", imports="record_imports")
"""The layout of a stand-alone file (the former ``refinery.db`` / ``keys.db``)."""

SQLITE_STORE_TABLES = Tables(
    runs="refinery_runs", cards="refinery_cards", keys="api_keys", imports="record_imports"
)
"""The tables inside a SQLite store file."""


class RecordsTx(Protocol):
    """Statements inside one transaction."""

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; returns the number of rows it changed."""
        ...


class Records(Protocol):
    """The record tables of one store (thread-safe; several processes may share them)."""

    tables: Tables
    label: str
    """Where the records are, for messages (a file path or a safe DSN)."""
    legacy_dir: Path | None
    """Where the former ``refinery.db`` / ``keys.db`` side files of this store were."""

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query (``sql`` is already filled in with :meth:`Tables.sql`)."""
        ...

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement in its own transaction; returns the rows it changed."""
        ...

    def transaction(self, lock: str) -> AbstractContextManager[RecordsTx]:
        """A write transaction holding the exclusive lock named ``lock`` (SQLite: the
        database write lock; PostgreSQL: a transaction-level advisory lock)."""
        ...


def sqlite_records_ddl(tables: Tables) -> tuple[str, ...]:
    """``CREATE TABLE IF NOT EXISTS`` statements of the record tables, in SQLite."""
    return tuple(
        tables.sql(s)
        for s in (
            """
            CREATE TABLE IF NOT EXISTS {runs} (
                id               TEXT PRIMARY KEY,
                collection       TEXT NOT NULL,
                status           TEXT NOT NULL,
                mode             TEXT NOT NULL,
                chunks_scanned   INTEGER NOT NULL DEFAULT 0,
                chunks_total     INTEGER NOT NULL DEFAULT 0,
                cards_made       INTEGER NOT NULL DEFAULT 0,
                cards_merged     INTEGER NOT NULL DEFAULT 0,
                llm_calls        INTEGER NOT NULL DEFAULT 0,
                groups_skipped   INTEGER NOT NULL DEFAULT 0,
                created_at       REAL NOT NULL,
                started_at       REAL,
                finished_at      REAL,
                heartbeat_at     REAL,
                pid              INTEGER,
                error            TEXT,
                note             TEXT,
                cancel_requested INTEGER NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX IF NOT EXISTS {runs}_by_collection ON {runs} (collection, created_at)",
            """
            CREATE TABLE IF NOT EXISTS {cards} (
                id          TEXT PRIMARY KEY,
                collection  TEXT NOT NULL,
                question    TEXT NOT NULL,
                answer      TEXT NOT NULL,
                sources     TEXT NOT NULL,
                status      TEXT NOT NULL,
                mode        TEXT NOT NULL,
                run_id      TEXT,
                created_at  REAL NOT NULL,
                updated_at  REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS {cards}_by_collection ON {cards} (collection, status)",
            """
            CREATE TABLE IF NOT EXISTS {keys} (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                token_hash  TEXT NOT NULL UNIQUE,
                hint        TEXT NOT NULL,
                role        TEXT NOT NULL,
                collection  TEXT NOT NULL,
                created_at  TEXT NOT NULL,
                revoked_at  TEXT
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS {imports} (
                source      TEXT PRIMARY KEY,
                imported_at TEXT NOT NULL,
                runs        INTEGER NOT NULL,
                cards       INTEGER NOT NULL,
                keys        INTEGER NOT NULL
            )
            """,
        )
    )


@dataclass(eq=False)
class SqliteRecords:
    """Records on a SQLite connection (the store's own, or a stand-alone file's).

    ``lock`` is the lock every user of ``db`` takes (a store shares its own), and
    ``begin`` opens the write transaction (a store passes its busy-aware one)."""

    db: sqlite3.Connection
    lock: threading.RLock
    tables: Tables
    label: str
    legacy_dir: Path | None = None
    begin: Callable[[], AbstractContextManager[sqlite3.Connection]] | None = None
    _owned: bool = field(default=False, repr=False)

    def _fail(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"records in {self.label}: {exc}")

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            try:
                return self.db.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self.lock:
            try:
                return int(self.db.execute(sql, tuple(params)).rowcount)
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc

    @contextmanager
    def transaction(self, lock: str) -> Iterator[RecordsTx]:
        del lock  # SQLite has one write lock: BEGIN IMMEDIATE takes it
        with self.lock:
            if self.begin is not None:
                with self.begin():
                    yield self
                return
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc
            try:
                yield self
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
            try:
                self.db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc

    def close(self) -> None:
        """Close the connection when this object opened it (a store closes its own)."""
        if self._owned:
            with self.lock:
                self.db.close()


_FILE_VERSION = 1
"""Version of a stand-alone records file's layout (``record_schema_version``)."""


def open_records_file(
    path: str | Path, *, timeout: float = 30.0, tables: Tables = FILE_TABLES, legacy_dir: Path | None = None
) -> SqliteRecords:
    """A stand-alone SQLite records file (created with its tables when missing; WAL mode,
    busy timeout), e.g. a former ``keys.db`` or a Milvus store's sidecar."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(target), timeout=timeout, check_same_thread=False, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in sqlite_records_ddl(tables):
                db.execute(statement)
            db.execute("CREATE TABLE IF NOT EXISTS record_schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM record_schema_version").fetchone()
            if (row[0] or 0) < _FILE_VERSION:
                db.execute("INSERT INTO record_schema_version (version) VALUES (?)", (_FILE_VERSION,))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the records file {target}: {exc}") from exc
    return SqliteRecords(db, threading.RLock(), tables, str(target), legacy_dir, _owned=True)
