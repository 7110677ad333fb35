"""Stores: the Store protocol and its backends, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from plait.errors import ConfigError
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
    "open_store",
]


def open_store(url: str) -> Store:
    """Open a store by URL: a file path or ``sqlite:///path`` selects the embedded store."""
    if url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("the PostgreSQL store is not available in this version")
    if url.startswith(("milvus://", "http://", "https://")):
        raise ConfigError("the Milvus store is not available in this version")
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") :]
    elif "://" in url:
        raise ConfigError(f"unknown store URL {url!r}: use a file path, sqlite:///path")
    return SQLiteStore(Path(url).expanduser())
