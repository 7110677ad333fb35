"""A persistent embedding cache: an :class:`Embedder` wrapper backed by one SQLite file.

Re-running an evaluation (or re-indexing a corpus into a fresh store) would embed the
same passages again; with a local model on two cores that is the slowest part by far.
:class:`CachedEmbedder` keys every passage vector by ``(provider, model,
sha256(text))`` and only sends the misses to the wrapped embedder, in one call.

* Only :meth:`~CachedEmbedder.embed_documents` is cached. Queries are embedded
  differently from passages by some models (e5 prefixes ``query:`` / ``passage:``),
  so :meth:`~CachedEmbedder.embed_query` always goes through to the wrapped embedder
  (which keeps its own small in-memory query cache).
* ``provider`` and ``model`` are the wrapped embedder's, so a collection indexed
  through the cache records the real model and accepts the bare embedder later.
* Vectors are stored as float32 blobs with their dimension; a cached row whose
  dimension differs from the others of the same model is treated as a miss.

The default file is ``~/.cache/plait/embeddings.sqlite`` (:data:`DEFAULT_CACHE_PATH`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from plait.embeddings.base import Embedder, embedder_languages, held_query, provider_query
from plait.embeddings.ensemble import EnsembleEmbedder
from plait.errors import ConfigError

__all__ = ["DEFAULT_CACHE_PATH", "CacheStats", "CachedEmbedder", "cache_path", "text_key"]

#: Where the cache lives unless a directory or file is given.
DEFAULT_CACHE_PATH = Path("~/.cache/plait/embeddings.sqlite")
CACHE_FILE_NAME = "embeddings.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    provider  TEXT NOT NULL,
    model     TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (provider, model, text_hash)
) WITHOUT ROWID
"""
_LOOKUP_BATCH = 500


def text_key(text: str) -> str:
    """The cache key of a text: the hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_path(location: str | Path | None = None) -> Path:
    """The cache file for ``location``: None → the default file; a directory (existing,
    or given without a ``.sqlite`` suffix) → ``embeddings.sqlite`` inside it; else the file."""
    if location is None:
        return DEFAULT_CACHE_PATH.expanduser()
    path = Path(location).expanduser()
    if path.is_dir() or path.suffix not in (".sqlite", ".db"):
        return path / CACHE_FILE_NAME
    return path


class CacheStats:
    """How many passage texts were served from the cache and how many were embedded."""

    __slots__ = ("embedded", "hits")

    def __init__(self) -> None:
        self.hits = 0
        self.embedded = 0

    def __repr__(self) -> str:
        return f"CacheStats(hits={self.hits}, embedded={self.embedded})"


class CachedEmbedder:
    """Wraps an embedder; passages are looked up in, and written to, a SQLite cache.

    >>> from plait.embeddings import FakeEmbedder
    >>> cached = CachedEmbedder(FakeEmbedder(), path=":memory:")
    >>> _ = cached.embed_documents(["a", "b"]); _ = cached.embed_documents(["a", "c"])
    >>> (cached.stats.hits, cached.stats.embedded)
    (1, 3)
    """

    def __init__(self, inner: Embedder, *, path: str | Path | None = None) -> None:
        if isinstance(inner, CachedEmbedder):
            raise ConfigError("the embedder is already cached; wrap the bare embedder")
        self.provider: str = inner.provider
        self.model: str = inner.model
        self.languages: frozenset[str] | None = embedder_languages(inner)
        self.stats = CacheStats()
        self._lock = threading.Lock()
        if str(path) == ":memory:":
            self.path: Path | None = None
            target = ":memory:"
        else:
            self.path = cache_path(path)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the embedding cache folder {self.path.parent}: {exc}") from exc
            target = str(self.path)
        try:
            self._conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the embedding cache {target}: {exc}") from exc
        self._dimension: int | None = None
        #: an ensemble's parts are cached one by one, under their own models (see below)
        self._parts: list[CachedEmbedder] = []
        if isinstance(inner, EnsembleEmbedder):
            self._parts = [CachedEmbedder(part, path=":memory:" if self.path is None else self.path) for part in inner.parts]
            inner = inner.with_parts(self._parts)
        self.inner = inner

    @property
    def dimension(self) -> int | None:
        """The wrapped embedder's dimension, or the cached vectors' when it has not run yet."""
        return self.inner.dimension or self._dimension

    def _lookup(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _LOOKUP_BATCH):
            part = unique[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            rows = self._conn.execute(
                "SELECT text_hash, dimension, vector FROM embeddings "
                f"WHERE provider = ? AND model = ? AND text_hash IN ({marks})",
                (self.provider, self.model, *part),
            ).fetchall()
            for key, dim, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] != dim:
                    continue
                expected = self.inner.dimension or self._dimension
                if expected is not None and dim != expected:
                    continue
                self._dimension = self._dimension or dim
                found[key] = vector
        return found

    def _store(self, pairs: Sequence[tuple[str, np.ndarray]]) -> None:
        rows = [
            (self.provider, self.model, key, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for key, v in pairs
        ]
        self._conn.execute("BEGIN")
        try:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embeddings (provider, model, text_hash, dimension, vector) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Cached rows where present; the misses embedded by the wrapped embedder in one call."""
        texts = list(texts)
        if self._parts:  # each part looks up and stores its own vectors; the join is cheap
            keys = [text_key(t) for t in texts]
            held = []
            for part in self._parts:
                with part._lock:
                    held.append(set(part._lookup(keys)))
            # a text is served from the cache when every part holds it, embedded when any part lacks it
            lacking = {key for key in keys if any(key not in h for h in held)}
            matrix = np.asarray(self.inner.embed_documents(texts), dtype=np.float32)
            self.stats.embedded += len(lacking)
            self.stats.hits += sum(1 for key in keys if key not in lacking)
            return matrix
        keys = [text_key(t) for t in texts]
        with self._lock:
            found = self._lookup(keys)
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found and key not in missing:
                missing[key] = text
        if missing:
            matrix = np.asarray(self.inner.embed_documents(list(missing.values())), dtype=np.float32)
            fresh = list(zip(missing, matrix, strict=True))
            with self._lock:
                self._store(fresh)
            found.update(fresh)
            self.stats.embedded += len(missing)
        self.stats.hits += sum(1 for key in keys if key not in missing)
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        return np.vstack([found[key] for key in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        """Not cached here: goes straight to the wrapped embedder."""
        return self.inner.embed_query(text)

    def cached_query(self, text: str) -> np.ndarray | None:
        """The wrapped embedder's held vector for the query (its query cache), else None."""
        return held_query(self.inner, text)

    def uncached_query(self, text: str) -> np.ndarray:
        """The wrapped embedder's provider call for the query, past its query cache."""
        return provider_query(self.inner, text)

    def __len__(self) -> int:
        """How many vectors the cache holds for this provider and model (an ensemble: the
        fewest any of its parts holds)."""
        if self._parts:
            return min(len(part) for part in self._parts)
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM embeddings WHERE provider = ? AND model = ?",
                (self.provider, self.model),
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the cache file (the wrapped embedder stays usable)."""
        for part in self._parts:
            part.close()
        with self._lock:
            self._conn.close()
