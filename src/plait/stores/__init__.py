"""Stores: the Store protocol and its backends, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from plait.errors import ConfigError, NotFoundError
from plait.stores.base import (
    BM25Params,
    ChunkState,
    Filters,
    ReplaceCounts,
    ScopeInfo,
    SourceInfo,
    Store,
    StoredChunk,
)
from plait.stores.sqlite import SQLiteStore

__all__ = [
    "BM25Params",
    "ChunkState",
    "Filters",
    "ReplaceCounts",
    "SQLiteStore",
    "ScopeInfo",
    "SourceInfo",
    "Store",
    "StoredChunk",
    "close_store",
    "new_sqlite_file",
    "open_store",
]


def open_store(url: str, *, create: bool = True) -> Store:
    """Open a store by URL: a file path or ``sqlite:///path`` selects the embedded store;
    ``postgresql://…`` (or ``postgres://…``) the PostgreSQL + pgvector store;
    ``milvus:///path.db`` (milvus-lite) or ``http(s)://host:19530`` a Milvus store.

    ``create=False`` (read-only commands) refuses to create a SQLite file that does not
    exist yet: a mistyped ``--store`` is :class:`NotFoundError`, not a new empty store."""
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from plait.stores.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                f"the PostgreSQL store needs psycopg, psycopg-pool and pgvector ({exc}): "
                "pip install 'plait[postgres]'"
            ) from exc
        return PostgresStore(url)
    if url.startswith(("milvus://", "http://", "https://")):
        # pymilvus and milvus-lite are imported when the store opens (with an install hint)
        from plait.stores.milvus import MilvusStore

        return MilvusStore.from_url(url)
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") :]
    elif "://" in url:
        raise ConfigError(
            f"unknown store URL {url!r}: use a file path, sqlite:///path or postgresql://…"
        )
    path = Path(url).expanduser()
    if not create and url != ":memory:" and not path.exists():
        raise NotFoundError(
            f"store {path} does not exist (check --store or PLAIT_STORE; `plait index` creates one)"
        )
    return SQLiteStore(path)


def new_sqlite_file(url: str) -> Path | None:
    """The file :func:`open_store` would create for ``url``: a SQLite path that does not
    exist yet; None for every other store (a server, ``:memory:``, an existing file)."""
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") :]
    elif "://" in url or url == ":memory:":
        return None
    path = Path(url).expanduser()
    return None if path.exists() else path


def close_store(store: Store, created: Path | None, *, failed: bool) -> None:
    """Close ``store``. After a failure (``failed``), remove ``created`` — the SQLite file
    opening it made (:func:`new_sqlite_file`) — while it holds no collection, so a failed
    command leaves no empty store behind; a store holding a collection is never removed."""
    discard = False
    if failed and created is not None:
        try:
            discard = not store.list_collections()
        except Exception:  # noqa: BLE001 - cannot tell: keep the file
            discard = False
    store.close()
    if discard and created is not None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{created}{suffix}").unlink(missing_ok=True)
