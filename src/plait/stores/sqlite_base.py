"""The SQLite store's connection: opening the file, transactions, migrations, ids.

:class:`SQLiteBase` owns the one connection (WAL mode, a busy timeout, a re-entrant
lock), turns "database is locked" into :class:`~plait.errors.StoreUnavailableError`,
runs :mod:`plait.stores.sqlite_schema`'s migrations and reads a collection's row and
write generation. :mod:`plait.stores.sqlite_search` (the two arms) and
:class:`plait.stores.sqlite.SQLiteStore` (collections, writes, reads) build on it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from plait.errors import NotFoundError, StoreError, StoreUnavailableError
from plait.stores.ann import (
    AnnIndex,
    AnnSettings,
    resolve_ann_threshold,
)
from plait.stores.base import (
    BM25Params,
)
from plait.stores.records import SqliteRecords
from plait.stores.sqlite_schema import MIGRATIONS
from plait.stores.sqlite_snapshot import (
    Snapshot,
)

_DEFAULT_BM25 = BM25Params()



class SQLiteBase:
    """The connection and transactions of a :class:`~plait.stores.sqlite.SQLiteStore`."""

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        ann_threshold: int | None = None,
        ann_settings: AnnSettings | None = None,
    ) -> None:
        self.path = Path(path)
        explicit = ann_threshold
        if explicit is None and ann_settings is not None:
            explicit = ann_settings.threshold
        self.ann_settings = replace(
            ann_settings or AnnSettings(), threshold=resolve_ann_threshold(explicit)
        )
        self._ann: dict[int, AnnIndex] = {}
        self.last_vector_path = "exact"
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(path), timeout=timeout, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open SQLite store at {path}: {exc}") from exc
        self._lock = threading.RLock()
        self._timeout = timeout
        self._snapshots: dict[int, Snapshot] = {}
        self._records: SqliteRecords | None = None
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        try:
            self._db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if (busy := self._busy(exc)) is not None:
                raise busy from None
            raise StoreError(f"{path} is not a SQLite database: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} is not a SQLite database: {exc}") from exc
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._migrate()

    # plumbing --------------------------------------------------------------------
    def _busy(self, exc: sqlite3.OperationalError) -> StoreUnavailableError | None:
        """"database is locked" (another process held the write lock past the busy
        timeout) as a one-line :class:`StoreUnavailableError`; None for other errors."""
        text = str(exc)
        if "locked" not in text and "busy" not in text:
            return None
        return StoreUnavailableError(
            f"SQLite store {self.path} is busy: another process has held its write lock for "
            f"more than {self._timeout:g} s ({text}); try again later"
        )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if (busy := self._busy(exc)) is not None:
                    raise busy from None
                raise
            try:
                yield self._db
            except sqlite3.OperationalError as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if (busy := self._busy(exc)) is not None:
                    raise busy from None
                raise
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    if (busy := self._busy(exc)) is not None:
                        raise busy from None
                    raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT inside sees the same committed state.

        A search reads the generation, the field lengths and the postings (or vectors)
        in separate statements; outside a transaction another process's commit could
        fall between them and pair postings with lengths of another generation.
        """
        with self._lock:
            if self._db.in_transaction:
                yield self._db
                return
            self._db.execute("BEGIN")
            try:
                yield self._db
            except sqlite3.OperationalError as exc:
                if (busy := self._busy(exc)) is not None:
                    raise busy from None
                raise
            finally:
                self._db.execute("COMMIT")

    def _migrate(self) -> None:
        with self._tx() as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            for number, migration in enumerate(MIGRATIONS, start=1):
                if number > current:
                    migration(db)
                    db.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if (busy := self._busy(exc)) is not None:
                    raise busy from None
                raise

    def _collection_row(self, name: str) -> tuple[Any, ...] | None:
        rows = self._query(
            "SELECT id, name, provider, model, dimension, created_at, generation "
            "FROM collections WHERE name = ?",
            (name,),
        )
        return rows[0] if rows else None

    def generation(self, name: str) -> int | None:
        """The collection's write counter (bumped by every write), None if it does not exist."""
        row = self._collection_row(name)
        return None if row is None else int(row[6])

    def database_file(self) -> Path | None:
        """The file SQLite opened, as an absolute path (None for an in-memory database):
        the same file however the store's path was spelt (relative to a working folder
        since left, through a symlink)."""
        rows = self._query("PRAGMA database_list")
        main = next((str(row[2]) for row in rows if row[1] == "main"), "")
        return Path(main) if main else None

    def _cid(self, name: str) -> int:
        row = self._collection_row(name)
        if row is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return int(row[0])

    @staticmethod
    def _bump(db: sqlite3.Connection, cid: int) -> None:
        db.execute("UPDATE collections SET generation = generation + 1 WHERE id = ?", (cid,))
