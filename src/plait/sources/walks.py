"""What a recorded root yields now, walked once and reused by readers.

Coverage and explain (for a document the index does not hold) compare the store with
what the roots yield *now*. Walking a 60 MB root costs 1–2 s; a search costs 5 ms. A
long-running server therefore keeps one :class:`RootWalk` per root (and chunk
settings) and walks again only when

* the collection changed (its *state* — a store generation where the store has one,
  else its counts and last-index time — differs from the one the walk was taken at:
  every index or reindex invalidates), or
* the walk is older than ``max_age`` seconds (default :data:`DEFAULT_MAX_AGE`), so
  edits on disk show up within that bound without any write.

A walk keeps only small summaries (ids, scopes, chunk id/hash pairs, what was skipped),
never the documents' text.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plait.errors import ConfigError, SourceError
from plait.sources.base import Subtree
from plait.sources.roots import open_root
from plait.types import SkippedSource

__all__ = ["DEFAULT_MAX_AGE", "RootWalk", "WalkCache", "collection_state", "walk_root"]

DEFAULT_MAX_AGE = 30.0
"""Seconds a root's walk is reused while the collection does not change."""

ChunkKeys = Callable[[Any], frozenset[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class RootWalk:
    """A root as read at one moment: what it yields and what it skipped, or why it failed."""

    scopes: dict[str, str] = field(default_factory=dict)  # source id → scope
    chunks: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)  # id → {(chunk id, hash)}
    skipped: tuple[SkippedSource, ...] = ()
    skipped_by_type: dict[str, int] = field(default_factory=dict)
    unmatched: frozenset[str] = frozenset()
    untracked: frozenset[str] = frozenset()
    uncommitted_deletions: frozenset[str] = frozenset()  # a git working tree's (Scan.uncommitted_deletions)
    unread: frozenset[str] = frozenset()  # skipped but still there (Scan.unread): indexing keeps them
    error: str | None = None


def collection_state(store: Any, collection: str) -> Hashable:
    """What changes whenever the collection is written: the store's generation where it
    has one (SQLite), else the collection's counts, model and last-index time."""
    generation = getattr(store, "generation", None)
    if callable(generation):
        return ("generation", generation(collection))
    info = store.get_collection(collection)
    if info is None:
        return None
    scopes = tuple((s.scope, s.chunks, s.chunks_without_vector, s.last_indexed_at) for s in store.scopes(collection))
    return (info.chunks, info.chunks_without_vector, info.sources, info.embedder_model, scopes)


def walk_root(root: Mapping[str, Any], chunk_keys: ChunkKeys, subtree: Subtree | None = None) -> RootWalk:
    """Read ``root`` (only ``subtree`` of it when given: what its runs read,
    :func:`plait.sources.nesting.subtree_of`) once; ``chunk_keys(doc)`` gives a document's
    (chunk id, content hash) set."""
    scopes: dict[str, str] = {}
    chunks: dict[str, frozenset[tuple[str, str]]] = {}
    try:
        scan = open_root(root, subtree).scan()
        for doc in scan:
            scopes[doc.source_id] = doc.scope
            chunks[doc.source_id] = chunk_keys(doc)
    except (SourceError, ConfigError, OSError) as exc:
        return RootWalk(error=str(exc))
    return RootWalk(
        scopes=scopes,
        chunks=chunks,
        skipped=tuple(scan.skipped),
        skipped_by_type=dict(scan.skipped_by_type),
        unmatched=frozenset(scan.unmatched),
        untracked=frozenset(scan.untracked),
        uncommitted_deletions=frozenset(scan.uncommitted_deletions),
        unread=frozenset(scan.unread),
    )


class WalkCache:
    """Walks of recorded roots, reused while the collection's state holds (thread-safe)."""

    def __init__(self, *, max_age: float = DEFAULT_MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        if max_age < 0:
            raise ConfigError(f"max_age must be >= 0 seconds, got {max_age!r}")
        self.max_age = float(max_age)
        self._clock = clock
        self._lock = threading.Lock()
        self._walks: dict[tuple[str, Hashable, Subtree | None], tuple[Hashable, float, RootWalk]] = {}
        self.walks = 0
        """How many walks were actually taken (for reports)."""

    def get(
        self,
        root: Mapping[str, Any],
        *,
        state: Hashable,
        chunk_keys: ChunkKeys,
        settings_key: Hashable = None,
        subtree: Subtree | None = None,
    ) -> RootWalk:
        """The walk of ``root`` (of its ``subtree``) taken at collection ``state``, walking
        again when stale."""
        key = (json.dumps(dict(root), sort_keys=True, default=str), settings_key, subtree)
        now = self._clock()
        with self._lock:
            cached = self._walks.get(key)
            if cached is not None and cached[0] == state and now - cached[1] < self.max_age:
                return cached[2]
        walk = walk_root(root, chunk_keys, subtree)
        with self._lock:
            self.walks += 1
            self._walks[key] = (state, now, walk)
            if len(self._walks) > 256:  # many collections: drop the oldest walks
                for old in sorted(self._walks, key=lambda k: self._walks[k][1])[:64]:
                    del self._walks[old]
        return walk
