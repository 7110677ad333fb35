"""The vector backfill: embed the chunks that have no vector yet, one claimed batch at a time.

Indexing writes every chunk with its lexical fields first (searchable at once), then
this loop fills the vectors:

1. claim a batch of vector-less chunks in the store (:meth:`Store.claim_without_vector`:
   a lease, atomic across processes, so two backfills never embed the same batch);
2. reuse a vector stored for the same content hash, embed the rest (one text per hash);
3. commit the batch's vectors in one write (:meth:`Store.set_vectors`) — a crash loses
   at most the batch in flight, and the next run continues with what is left.

A claim held by a process of this host that no longer runs (killed) is released at
once; any other claim ends with its lease. While other owners hold the only chunks
left, the loop waits for them (the collection's counts still move) unless told not to.
On return, normal or not (Ctrl-C), the owner's claims are released.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from plait.fields import embedding_text
from plait.stores.base import Store
from plait.types import Chunk
from plait.usage import UsageRow, metering, rows_of

__all__ = [
    "DEFAULT_BACKFILL_BATCH",
    "DEFAULT_LEASE_SECONDS",
    "BackfillOutcome",
    "BackfillProgress",
    "owner_id",
    "run_backfill",
    "vector_coverage",
]

logger = logging.getLogger(__name__)

#: Chunks per claimed batch: the most a crash can lose.
DEFAULT_BACKFILL_BATCH = 32
#: How long a claim holds when its owner cannot be seen to have died (another host).
DEFAULT_LEASE_SECONDS = 600.0

BackfillProgress = Callable[[int, int], None]
"""Called with (chunks that have a vector, chunks in the collection) before the first
batch and after each one."""

Embed = Callable[[list[str]], np.ndarray | None]
"""Embeds texts; None when the embedder failed (the loop stops)."""


def owner_id() -> str:
    """A claim owner: ``host:pid:random`` (the random part tells two runs of one pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _dead(owner: str) -> bool:
    """True for an owner of this host whose process no longer exists."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def vector_coverage(chunks: int, chunks_without_vector: int) -> float:
    """The share of chunks that have a vector, 0..1 (0 for an empty collection)."""
    if chunks <= 0:
        return 0.0
    return round((chunks - chunks_without_vector) / chunks, 4)


@dataclass
class BackfillOutcome:
    """What one backfill run did."""

    embedded: int = 0
    """Texts sent to the embedder."""
    reused: int = 0
    """Chunks given a vector stored for the same content hash."""
    deduplicated: int = 0
    """Chunks given the vector embedded for an equal text of the same batch."""
    filled: int = 0
    """Chunks that got a vector."""
    batches: int = 0
    stopped: bool = False
    """The stop event was set before the work was done."""
    failed: bool = False
    """The embedder failed (the caller has the reason)."""


def _counts(store: Store, collection: str) -> tuple[int, int]:
    info = store.get_collection(collection)
    if info is None:
        return 0, 0
    return info.chunks - info.chunks_without_vector, info.chunks


def run_backfill(
    store: Store,
    collection: str,
    embed: Embed,
    *,
    batch_size: int = DEFAULT_BACKFILL_BATCH,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    progress: BackfillProgress | None = None,
    stop: threading.Event | None = None,
    wait_for_others: bool = True,
    poll_seconds: float = 0.5,
) -> BackfillOutcome:
    """Embed the collection's vector-less chunks in claimed batches (see the module docstring)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    outcome = BackfillOutcome()
    owner = owner_id()
    if progress is not None:
        progress(*_counts(store, collection))
    try:
        while True:
            if stop is not None and stop.is_set():
                outcome.stopped = True
                break
            todo = store.claim_without_vector(
                collection, owner=owner, limit=batch_size, lease_seconds=lease_seconds
            )
            if not todo:
                others = {o: n for o, n in store.claim_owners(collection).items() if o != owner}
                stale = [o for o in others if _dead(o)]
                for gone in stale:
                    released = store.release_claims(collection, gone)
                    logger.info("released %d claims of %s (its process is gone)", released, gone)
                if stale:
                    continue
                if not others or not wait_for_others:
                    break
                if progress is not None:
                    progress(*_counts(store, collection))
                if stop is not None:
                    stop.wait(poll_seconds)
                else:
                    time.sleep(poll_seconds)
                continue
            if not _fill(store, collection, [cid for cid, _ in todo], embed, outcome):
                outcome.failed = True
                break
            outcome.batches += 1
            if progress is not None:
                progress(*_counts(store, collection))
    finally:
        try:
            store.release_claims(collection, owner)
        except Exception:  # the store may be gone (closing, server down): the lease ends it
            logger.warning("could not release backfill claims of %s", owner, exc_info=True)
    return outcome


def _fill(store: Store, collection: str, ids: Sequence[str], embed: Embed, outcome: BackfillOutcome) -> bool:
    """Give the claimed chunks vectors in one write; False when the embedder failed."""
    chunks = store.get_chunks(collection, ids)
    if not chunks:
        return True  # deleted since the claim
    reuse = store.vectors_by_hash(collection, [c.content_hash for c in chunks.values()])
    groups: dict[str, list[Chunk]] = {}
    vectors: dict[str, np.ndarray] = {}
    for chunk in chunks.values():
        if chunk.content_hash in reuse:
            vectors[chunk.id] = reuse[chunk.content_hash]
            outcome.reused += 1
        else:
            groups.setdefault(chunk.content_hash, []).append(chunk)
    usage: list[UsageRow] = []
    if groups:
        with metering("index", detached=True) as (events, _):
            matrix = embed([embedding_text(group[0]) for group in groups.values()])
        usage = rows_of(events)
        if matrix is None:
            if usage:  # the provider was paid for calls that came back unusable
                store.add_usage(collection, usage)
            return False
        outcome.embedded += len(groups)
        outcome.deduplicated += sum(len(group) - 1 for group in groups.values())
        for row, group in zip(matrix, groups.values(), strict=True):
            for chunk in group:
                vectors[chunk.id] = row
    # A chunk rewritten with other content while it was embedded keeps no stale vector.
    current = store.get_chunks(collection, list(vectors))
    fresh = {
        cid: vec
        for cid, vec in vectors.items()
        if cid in current and current[cid].content_hash == chunks[cid].content_hash
    }
    outcome.filled += store.set_vectors(collection, fresh, usage=usage)  # one transaction
    return True
