"""The SQLite store's schema: numbered migrations, applied in order by :class:`SQLiteStore`.

``schema_version`` records every migration applied; a file written by an older version
is upgraded on open. Migration ``n`` is ``MIGRATIONS[n - 1]``; each runs inside the
store's migration transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from plait.stores.records import SQLITE_STORE_TABLES, sqlite_records_ddl

__all__ = ["MIGRATIONS"]


def _execute_all(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the current transaction (executescript would commit)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _migration_1(db: sqlite3.Connection) -> None:
    _execute_all(
        db,
        """
        CREATE TABLE collections (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            provider TEXT, model TEXT, dimension INTEGER,
            settings TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE sources (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            source_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            indexed_at TEXT NOT NULL,
            PRIMARY KEY (collection_id, source_id)
        );
        CREATE TABLE scopes (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            scope TEXT NOT NULL,
            last_indexed_at TEXT NOT NULL,
            PRIMARY KEY (collection_id, scope)
        );
        CREATE TABLE chunks (
            rowid INTEGER PRIMARY KEY,
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            chunk_id TEXT NOT NULL,
            source_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            origin TEXT NOT NULL,
            metadata TEXT NOT NULL,
            vector BLOB,
            len_exact INTEGER NOT NULL,
            len_stems INTEGER NOT NULL,
            UNIQUE (collection_id, chunk_id)
        );
        CREATE INDEX chunks_source ON chunks(collection_id, source_id);
        CREATE INDEX chunks_hash ON chunks(collection_id, content_hash);
        CREATE TABLE terms (
            id INTEGER PRIMARY KEY,
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            field INTEGER NOT NULL,
            term TEXT NOT NULL,
            df INTEGER NOT NULL,
            UNIQUE (collection_id, field, term)
        );
        CREATE TABLE postings (
            term_id INTEGER NOT NULL,
            chunk_rowid INTEGER NOT NULL,
            tf INTEGER NOT NULL,
            PRIMARY KEY (term_id, chunk_rowid)
        ) WITHOUT ROWID;
        CREATE INDEX postings_chunk ON postings(chunk_rowid);
        """
    )


def _migration_2(db: sqlite3.Connection) -> None:
    """Each source remembers the recorded root that produced it (reindex deletes vanished ones)."""
    db.execute("ALTER TABLE sources ADD COLUMN root TEXT NOT NULL DEFAULT ''")
    db.execute("CREATE INDEX sources_root ON sources(collection_id, root)")


def _migration_3(db: sqlite3.Connection) -> None:
    """A covering index for the lexical arm's per-generation load of every chunk's lengths.

    Without it that load reads every chunk row (content and vector included) after each
    write; with it, only this narrow index.
    """
    db.execute(
        "CREATE INDEX chunks_lengths ON chunks(collection_id, len_exact, len_stems, chunk_id)"
    )


def _migration_4(db: sqlite3.Connection) -> None:
    """Backfill claims: which process embeds which vector-less chunk, until when.

    A partial index keeps finding the chunks still without a vector cheap while most
    have one.
    """
    _execute_all(
        db,
        """
        CREATE TABLE vector_claims (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            chunk_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (collection_id, chunk_id)
        );
        CREATE INDEX vector_claims_owner ON vector_claims(collection_id, owner);
        CREATE INDEX chunks_without_vector ON chunks(collection_id, rowid) WHERE vector IS NULL
        """,
    )


def _migration_5(db: sqlite3.Connection) -> None:
    """Refinery runs and FAQ cards, API keys, and the former side files imported
    (:mod:`plait.stores.records`; formerly ``refinery.db`` / ``keys.db`` next to the store)."""
    for statement in sqlite_records_ddl(SQLITE_STORE_TABLES):
        db.execute(statement)


def _migration_6(db: sqlite3.Connection) -> None:
    """Usage metering: provider calls and tokens per collection, hour, kind, purpose, model."""
    _execute_all(
        db,
        """
        CREATE TABLE usage (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            bucket TEXT NOT NULL,
            kind TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            estimated INTEGER NOT NULL,
            calls INTEGER NOT NULL DEFAULT 0,
            texts INTEGER NOT NULL DEFAULT 0,
            characters INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (collection_id, bucket, kind, purpose, provider, model, estimated)
        )
        """,
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
    _migration_5,
    _migration_6,
)
