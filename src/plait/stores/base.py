"""The Store protocol: what every backend (SQLite, PostgreSQL, Milvus) provides.

A store keeps chunks, their analysed lexical fields and their vectors, and answers
one arm at a time with raw ranked candidates. It knows nothing about fusion, badges
or interfaces: the search service does that. Every write that touches a source's
chunks is one transaction, so the two arms never disagree on which chunks exist.

The contract tests every backend must pass ship in :mod:`plait.testing.contract`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from plait.stores.records import Records
from plait.types import Chunk, CollectionInfo
from plait.usage import UsageRow

__all__ = [
    "AheadScopeStore",
    "BM25Params",
    "BulkStore",
    "Change",
    "ChunkState",
    "CollectionReadStore",
    "Filters",
    "ReplaceCounts",
    "ScopeInfo",
    "SearchScopeStore",
    "SourceInfo",
    "SourceWrite",
    "Store",
    "StoredChunk",
    "TwoArmStore",
    "add_count",
    "is_read_only",
    "replace_changes",
]

R = TypeVar("R")


def add_count(stored: Any, amount: int) -> int:
    """A counter setting after :meth:`Store.increment_settings` adds ``amount`` to its
    stored value (absent, or not an integer: 0).

    >>> add_count(None, 3), add_count(4, 3), add_count("x", 3), add_count(True, 3)
    (3, 7, 3, 3)
    """
    base = stored if isinstance(stored, int) and not isinstance(stored, bool) else 0
    return base + int(amount)


def is_read_only(store: object) -> bool:
    """True for a store opened on a server that refuses writes (a PostgreSQL hot standby:
    ``read_only``); the service then skips the writes a search would make (usage, the ask
    gate's calibration) instead of failing the search."""
    return getattr(store, "read_only", False) is True


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as written: the chunk, its two analysed fields and its vector (or None)."""

    chunk: Chunk
    exact: Sequence[str]
    stems: Sequence[str]
    vector: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class SourceWrite:
    """One source of a :meth:`BulkStore.replace_sources` call: make it hold ``chunks``."""

    source_id: str
    scope: str
    chunks: Sequence[StoredChunk]
    root: str = ""


@dataclass(frozen=True, slots=True)
class ChunkState:
    """What the store holds for a chunk id: enough to decide whether to re-embed."""

    chunk_id: str
    content_hash: str
    has_vector: bool


@dataclass(frozen=True, slots=True)
class ReplaceCounts:
    """What replacing one source's chunks changed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    conflict: str | None = None
    """With ``claim``: the other root that owns the source (nothing was written)."""


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    """One chunk of a source being replaced, against the row the store holds under its id."""

    item: StoredChunk
    kept: R | None = None
    """The stored row, when its content hash is the chunk's: kept (its other fields refreshed)."""
    replaced: R | None = None
    """The stored row, when the chunk's content changed: deleted, the chunk written anew."""


def replace_changes(
    existing: Mapping[str, R], chunks: Sequence[StoredChunk], content_hash: Callable[[R], str]
) -> tuple[list[Change[R]], list[R], ReplaceCounts]:
    """What making a source hold exactly ``chunks`` changes, decided the same way by every
    store: ``existing`` maps the chunk ids the store holds for the source to their rows.
    Returns each chunk (in order) with its kept or replaced row (neither: added), the rows
    of chunk ids the source no longer has, and the counts."""
    changes: list[Change[R]] = []
    added = updated = unchanged = 0
    for item in chunks:
        old = existing.get(item.chunk.id)
        if old is None:
            added += 1
            changes.append(Change(item))
        elif content_hash(old) == item.chunk.content_hash:
            unchanged += 1
            changes.append(Change(item, kept=old))
        else:
            updated += 1
            changes.append(Change(item, replaced=old))
    ids = {item.chunk.id for item in chunks}
    gone = [row for chunk_id, row in existing.items() if chunk_id not in ids]
    return changes, gone, ReplaceCounts(added, updated, unchanged, len(gone))


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A source the collection holds chunks for."""

    source_id: str
    scope: str
    chunks: int
    chunks_without_vector: int
    indexed_at: str
    root: str = ""
    """The key of the recorded root (folder, git tree, session log) that produced the
    source; "" for sources indexed from code. Reindex deletes a root's sources that the
    root no longer yields."""


@dataclass(frozen=True, slots=True)
class ScopeInfo:
    """Per-scope figures for coverage; ``last_indexed_at`` is stored, never guessed."""

    scope: str
    sources: int
    chunks: int
    chunks_without_vector: int
    last_indexed_at: str | None


@dataclass(frozen=True, slots=True)
class Filters:
    """Restricts both arms: chunks whose scope is in ``scopes`` (when given) and whose
    metadata has every key of ``metadata`` with exactly that value."""

    scopes: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.scopes and not self.metadata


@dataclass(frozen=True, slots=True)
class BM25Params:
    """Okapi BM25 with Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    ``exact_weight`` and ``stems_weight`` scale the two fields' scores before they
    are summed into the lexical score.
    """

    k1: float = 0.9
    b: float = 0.4
    exact_weight: float = 1.0
    stems_weight: float = 1.0


@runtime_checkable
class Store(Protocol):
    """A place to keep collections of chunks and query each arm."""

    # collections -------------------------------------------------------------
    def ensure_collection(self, name: str) -> CollectionInfo:
        """Create the collection if missing; return its info."""
        ...

    def get_collection(self, name: str) -> CollectionInfo | None: ...

    def list_collections(self) -> list[CollectionInfo]: ...

    def ping(self) -> None:
        """Raise :class:`~plait.errors.StoreError` (``StoreUnavailableError`` when it cannot
        be reached) unless the store answers now: readiness, not a search."""
        ...

    def delete_collection(self, name: str) -> bool:
        """Remove the collection and everything in it; False if it did not exist."""
        ...

    def set_embedder(
        self, name: str, *, provider: str, model: str, dimension: int | None
    ) -> CollectionInfo:
        """Record the collection's embedding model (first index, or learning the dimension)."""
        ...

    def get_settings(self, name: str) -> dict[str, Any]: ...

    def update_settings(
        self, name: str, settings: Mapping[str, Any], *, remove: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Merge ``settings`` into the collection's stored settings, delete the keys in
        ``remove`` (absent ones ignored), in one step, and return them. (A key merged with
        the value None stays, as null.)"""
        ...

    def increment_settings(
        self, name: str, increments: Mapping[str, int], *, settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Add each of ``increments`` to the integer setting of that key (absent or not an
        integer: 0) and merge ``settings``, in one atomic step: two writers counting at once
        both count (a read then a write of the settings would lose one). Returns the
        settings as stored (Milvus, which has no transactions: atomic within the process,
        under the store's lock; one writer per collection across processes)."""
        ...

    # writes --------------------------------------------------------------------
    def chunk_states(self, collection: str, source_id: str) -> dict[str, ChunkState]: ...

    def vectors_by_hash(self, collection: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already stored in the collection for chunks with these content hashes."""
        ...

    def replace_source(
        self,
        collection: str,
        source_id: str,
        scope: str,
        chunks: Sequence[StoredChunk],
        *,
        root: str = "",
        claim: bool = False,
    ) -> ReplaceCounts:
        """Make the source hold exactly ``chunks``, atomically: old or new, never half.

        A chunk whose id and content hash are unchanged keeps its stored vector when
        the new one is None, and has it overwritten when a vector is given (a full
        reindex re-embeds in place). ``root`` is stored with the source (replacing the
        previous value) and reported by :meth:`list_sources`. With ``claim``, a source
        recorded under another non-empty root is left untouched and the counts name
        that root (``conflict``): the check and the write are one transaction, so two
        concurrent runs of different roots cannot both take a source.
        """
        ...

    def delete_source(self, collection: str, source_id: str) -> int:
        """Remove a source's chunks atomically; returns how many were removed."""
        ...

    def set_vectors(
        self, collection: str, vectors: Mapping[str, np.ndarray], *, usage: Sequence[UsageRow] = ()
    ) -> int:
        """Store vectors for existing chunks (backfill); returns how many were set."""
        ...

    def mark_scope_indexed(self, collection: str, scope: str, at: str) -> None: ...

    # backfill claims -----------------------------------------------------------
    def claim_without_vector(
        self, collection: str, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[str, str]]:
        """Claim up to ``limit`` chunks that have no vector and no live claim, for
        ``owner`` until ``lease_seconds`` from now; returns their (chunk id, content) in
        store order.

        Atomic across processes: two owners never hold the same chunk. A claim
        replaces ``owner``'s previous one (its last batch is done or abandoned), and
        claims past their lease are dropped first.
        """
        ...

    def release_claims(self, collection: str, owner: str) -> int:
        """Drop every claim of ``owner``; returns how many it held."""
        ...

    def claim_owners(self, collection: str) -> dict[str, int]:
        """Owners holding a live claim, with how many chunks each holds."""
        ...

    def without_vector(self, collection: str, chunk_ids: Sequence[str]) -> set[str]:
        """Those of ``chunk_ids`` that exist and have no vector yet."""
        ...

    # reads ---------------------------------------------------------------------
    def list_sources(
        self, collection: str, scope: str | None = None, *, root: str | None = None
    ) -> list[SourceInfo]:
        """Sources holding chunks, by source id; only those of ``scope`` / ``root`` when given."""
        ...

    def scopes(self, collection: str) -> list[ScopeInfo]: ...

    def chunks_without_vector(
        self, collection: str, *, limit: int | None = None
    ) -> list[tuple[str, str]]:
        """(chunk id, content) of chunks that have no vector yet."""
        ...

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]: ...

    def chunk_ids(self, collection: str, source_id: str | None = None) -> list[str]: ...

    def lexical_search(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
    ) -> list[tuple[str, float]]:
        """Chunks matching any query term, best BM25 first; ``limit=None`` ranks all."""
        ...

    def vector_search(
        self,
        collection: str,
        vector: np.ndarray,
        *,
        limit: int | None,
        filters: Filters | None = None,
    ) -> list[tuple[str, float]]:
        """Chunks with a vector, highest cosine first; ``limit=None`` ranks all."""
        ...

    # records -------------------------------------------------------------------
    def records(self) -> Records:
        """The store's record tables: refinery runs and cards, API keys
        (:mod:`plait.stores.records`). The first call imports the former side files."""
        ...

    # usage ---------------------------------------------------------------------
    def add_usage(
        self, collection: str, rows: Sequence[UsageRow], *, settings: Mapping[str, Any] | None = None
    ) -> None:
        """Add ``rows`` to the collection's usage (summed into the row of the same bucket,
        kind, purpose, provider, model and ``estimated``), in one transaction — with
        ``settings`` merged into the collection's settings (as :meth:`update_settings`)
        in the same one: a copy's "usage copied" marker is written with the rows or not
        at all (Milvus: in the same upsert request; it has no transactions)."""
        ...

    def usage(self, collection: str, *, since: str | None = None) -> list[UsageRow]:
        """The collection's usage rows from bucket ``since`` on (ISO hour; None: all)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class TwoArmStore(Protocol):
    """A store that answers both arms at once (one round trip to a server store)."""

    def search_arms(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        vector: np.ndarray | None,
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
        lexical: bool = True,
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """``(lexical_search(...), vector_search(...))`` with the same arguments, in one
        request; the dense list is empty when ``vector`` is None."""
        ...


@runtime_checkable
class CollectionReadStore(Protocol):
    """A store that reads a collection and its settings together (one round trip to a
    server store instead of :meth:`Store.get_collection` then :meth:`Store.get_settings`)."""

    def collection_with_settings(self, name: str) -> tuple[CollectionInfo, dict[str, Any]] | None:
        """``(get_collection(name), get_settings(name))`` read in one statement (one
        snapshot); None when the collection does not exist."""
        ...


@runtime_checkable
class SearchScopeStore(Protocol):
    """A store whose reads inside one search can share the collection's state as its first
    read found it (a server store then skips re-checking it: fewer round trips)."""

    def search_scope(self, collection: str) -> AbstractContextManager[None]:
        """Inside the block, this thread's reads of ``collection`` may answer as of the
        block's first read of it; writes committed before that read are always seen."""
        ...


@runtime_checkable
class AheadScopeStore(Protocol):
    """A :class:`SearchScopeStore` whose scope may answer its first read from the last one
    while the read is in flight (PostgreSQL: the round trip overlaps the search's work)."""

    def search_scope(self, collection: str, *, ahead: bool = False) -> AbstractContextManager[None]:
        """:meth:`SearchScopeStore.search_scope`; ``ahead``: the block's first read of
        ``collection`` may answer before the store has heard back."""
        ...

    def ahead_held(self, collection: str) -> bool:
        """False when this thread's open scope answered its first read ahead and the store
        then read something else: whatever the block computed must be computed again
        (in a scope without ``ahead``)."""
        ...


@runtime_checkable
class BulkStore(Protocol):
    """A store that replaces many sources in one transaction (fewer round trips and
    statements per chunk than one :meth:`Store.replace_source` call per source)."""

    def replace_sources(self, collection: str, writes: Sequence[SourceWrite]) -> list[ReplaceCounts]:
        """Each source of ``writes`` as :meth:`Store.replace_source` (without ``claim``)
        would leave it, all in one transaction: every source written, or none. Returns
        their counts in order. A source may appear once."""
        ...

    def deferred_index(self, collection: str) -> AbstractContextManager[None]:
        """A block of bulk writes during which the collection's ANN index is not kept up
        row by row: it is built once when the block ends (also when it raises an error, but
        not on ``KeyboardInterrupt`` / ``SystemExit``). Searches inside the block stay
        exact, only slower; a process killed or interrupted inside it leaves the collection
        without the index until the next such block (a resumed copy) or ``build_index``."""
        ...
