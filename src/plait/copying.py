"""Copy a collection between stores without embedding anything (issue 27).

``copy_collection(source, target, name)`` moves everything a collection is — its chunks
with both lexical fields and their vectors, the model record, the settings, the scopes'
last-indexed times, the refinery runs and FAQ cards, the API keys that cover it, and its
usage-metering rows (``plait usage``, the history of its provider calls) — from one
:class:`~plait.stores.base.Store` to another (SQLite, PostgreSQL, Milvus, in any
direction). Vectors are read from the source and written as they are: no embedder
is involved. The lexical fields are re-derived from each chunk by the analyser the
indexer uses (:func:`plait.analysis.analyse` of :func:`plait.fields.lexical_text`), so
they are exactly what an index run would write.

Each source is written atomically (old or new, never half) — by
:meth:`~plait.stores.base.Store.replace_source`, or, into a store that writes many
sources in one transaction (:class:`~plait.stores.base.BulkStore`: PostgreSQL), by
:meth:`~plait.stores.base.BulkStore.replace_sources` in batches of whole sources of about
``batch_chunks`` chunks — so a killed copy leaves whole sources only. The
target collection carries a ``copy`` marker in its settings until the copy finishes; a
re-run sees it, skips every source the target already holds identically (same chunk
ids, content hashes and vector presence) and writes the rest — it never duplicates.
A non-empty target without that marker is refused unless ``replace=True``.

At the end the copy is verified: collection counts and refinery run and card counts on
both sides, a content checksum
per source, and the same top 10 on both stores for a sample of the collection's own
pseudo-queries (each sampled chunk's opening words on the lexical arm, its own vector
on the dense arm ranked exactly — an ANN index could miss a neighbour on one side only;
the lexical arm as searches run it, with a limit, exact on every store; ties broken by
chunk id so equal scores compare equal).

A copy under another name within one store gives the copy's refinery runs and FAQ cards
new ids (ids are keys of the whole store). The card chunks are then written under the
copy's card ids — source ``card:<new id>``, the chunk ids an index run of that card
builds, ``cardId`` and origin naming it — and the copy's ``searchHidden`` lists them, so
``qa_first`` and card review on the copy act on the copy's own cards; the verification
compares those chunks with the source's under that renaming.

A copy embeds nothing: the vectors are the source's. An embedder named for it (``plait
copy --embedder``, ``copy_collection(embedder=NAME)``) must therefore be the model they
come from (:mod:`plait.carried_model`: provider, model and dimension), else it is refused
before anything is written. A collection never embedded takes it as the copy's embedder,
as a first index would record it; its chunks wait for their vectors as after ``plait
index --detach``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import Field

from plait.analysis import analyse, analyse_query
from plait.carried_model import check_copy_embedder
from plait.collection_names import check_new_collection
from plait.collection_settings import (
    portable_settings,
    read_settings,
    restore_settings,
    settings_update,
    write_settings,
)
from plait.errors import ConflictError, NotFoundError, ValidationError
from plait.fields import lexical_text
from plait.refinery.cards import card_chunk_id, card_source_id
from plait.refinery.models import CARD_SCOPE
from plait.refinery.store import RefineryStore
from plait.store_identity import is_one_collection, may_be_one_collection, store_sameness
from plait.stores.base import BulkStore, SourceWrite, Store, StoredChunk
from plait.stores.records_import import collection_records, copy_records, write_records
from plait.types import FileOrigin, Model

__all__ = [
    "CopyProgress",
    "CopyReport",
    "CopyVerification",
    "check_copy_embedder",
    "copy_collection",
    "copy_usage",
    "read_source",
    "same_store",
    "source_checksum",
    "verify_copy",
]

log = logging.getLogger(__name__)

CopyProgress = Callable[[int, int, int], None]
"""``progress(sources done, sources total, chunks written so far)``."""

_QUERY_WORDS = 12
_TOP = 10


class CopyVerification(Model):
    """What was compared after a copy, and what differed (nothing, when ``ok``)."""

    source_chunks: int
    target_chunks: int
    source_sources: int
    target_sources: int
    source_without_vector: int
    target_without_vector: int
    checksum_mismatches: list[str] = Field(default_factory=list)
    """Sources whose content checksum differs between the stores."""
    queries: int = 0
    """Pseudo-queries run on both stores (lexical and, where a vector exists, dense)."""
    query_mismatches: list[str] = Field(default_factory=list)
    """``arm: chunk id`` of the pseudo-queries whose top 10 differed."""
    source_records: list[int] = Field(default_factory=lambda: [0, 0])
    """The collection's refinery runs and FAQ cards on the source, ``[runs, cards]``."""
    target_records: list[int] = Field(default_factory=lambda: [0, 0])
    """The same on the target (a copy whose rows were not all written differs here)."""
    ok: bool


class CopyReport(Model):
    """What ``plait copy`` did for one collection."""

    collection: str
    target_collection: str
    sources_copied: int
    sources_already_there: int
    """Sources a resumed copy found already written identically (skipped)."""
    chunks_copied: int
    vectors_copied: int
    runs: int
    cards: int
    keys: int
    usage_rows: int = 0
    """Usage-metering rows (``plait usage``) of the collection brought to the target."""
    seconds: float
    chunks_per_second: float
    verification: CopyVerification | None = None


def read_source(store: Store, collection: str, source_id: str) -> list[StoredChunk]:
    """A source's chunks as written: both lexical fields and the stored vector (or None)."""
    ids = store.chunk_ids(collection, source_id)
    chunks = store.get_chunks(collection, ids)
    states = store.chunk_states(collection, source_id)
    wanted = sorted({chunks[i].content_hash for i in ids if i in chunks and states[i].has_vector})
    vectors = store.vectors_by_hash(collection, wanted) if wanted else {}
    out = []
    for chunk_id in ids:
        chunk = chunks[chunk_id]
        fields = analyse(lexical_text(chunk))
        vector = vectors.get(chunk.content_hash) if states[chunk_id].has_vector else None
        out.append(StoredChunk(chunk, list(fields.exact), list(fields.stems), vector))
    return out


def source_checksum(
    store: Store, collection: str, source_id: str, *, rename: Mapping[str, str] | None = None
) -> str:
    """SHA-256 over a source's chunks (id, content hash, content, vector present), by id;
    ``rename`` gives the id a chunk is counted under (a renamed copy's card chunks)."""
    names = rename or {}
    ids = sorted(store.chunk_ids(collection, source_id), key=lambda cid: names.get(cid, cid))
    chunks = store.get_chunks(collection, ids)
    states = store.chunk_states(collection, source_id)
    digest = hashlib.sha256()
    for chunk_id in ids:
        chunk = chunks[chunk_id]
        name = names.get(chunk_id, chunk_id)
        for part in (name, chunk.content_hash, chunk.content, "v" if states[chunk_id].has_vector else "-"):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()


@dataclass
class _Renames:
    """What a copy renamed within one store writes under new names: the card sources
    (``card:<id>`` → ``card:<the copy's id>``) and their chunks; empty for any other copy."""

    cards: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, str] = field(default_factory=dict)


def _card_renames(source: Store, collection: str, name: str, *, shared: bool) -> _Renames:
    renames = _Renames()
    if not shared or name == collection:
        return renames
    renames.cards = {str(row[0]): _renamed_id(row[0], name) for row in collection_records(source.records(), collection)["cards"]}
    for info in source.list_sources(collection, CARD_SCOPE):
        old = info.source_id.removeprefix(card_source_id(""))
        if info.source_id == old or old not in renames.cards:
            continue  # not the source of one of the collection's cards: copied as it is
        new = renames.cards[old]
        renames.sources[info.source_id] = card_source_id(new)
        for chunk_id, chunk in source.get_chunks(collection, source.chunk_ids(collection, info.source_id)).items():
            renames.chunks[chunk_id] = card_chunk_id(new, chunk.ordinal)
    return renames


def _renamed_source(items: Sequence[StoredChunk], renames: _Renames, source_id: str) -> list[StoredChunk]:
    """A card source's chunks as the copy's card ``source_id`` holds them."""
    card = renames.cards[source_id.removeprefix(card_source_id(""))]
    out = []
    for item in items:
        chunk = item.chunk
        origin = chunk.origin
        if isinstance(origin, FileOrigin):
            origin = origin.model_copy(update={"source_path": f"faq/{card}"})
        moved = chunk.model_copy(
            update={
                "id": renames.chunks[chunk.id],
                "source_id": renames.sources[source_id],
                "origin": origin,
                "metadata": {**chunk.metadata, "cardId": card},
            }
        )
        fields = analyse(lexical_text(moved))
        out.append(StoredChunk(moved, list(fields.exact), list(fields.stems), item.vector))
    return out


def _same_state(
    source: Store, target: Store, collection: str, target_name: str, source_id: str, renames: _Renames
) -> bool:
    names = renames.chunks
    want = {names.get(k, k): (v.content_hash, v.has_vector) for k, v in source.chunk_states(collection, source_id).items()}
    have = {
        k: (v.content_hash, v.has_vector)
        for k, v in target.chunk_states(target_name, renames.sources.get(source_id, source_id)).items()
    }
    return bool(want) and want == have


def same_store(a: Store, b: Store) -> bool:
    """Whether two store objects certainly name the same storage, however it was spelt
    (:func:`plait.store_identity.store_sameness` is ``"same"``): the same object; the same
    SQLite file (by file identity: a relative path, a symlink or a hard link to it is the
    same store); the same PostgreSQL cluster (a replica and its primary are one),
    database and schema, asked of the servers; the same milvus-lite file and prefix; the
    same Milvus server (its address normalised and resolved), database and prefix."""
    return store_sameness(a, b) == "same"


def _records_shared(source: Store, target: Store, collection: str) -> bool:
    """Whether the target's records hold the source collection's own refinery rows (a run
    or card id under the source's collection name): the two stores keep one records
    storage (one Milvus records file under two addresses, say) whatever their addresses."""
    rows = collection_records(source.records(), collection)
    t = target.records().tables
    for table, found in (("runs", rows["runs"]), ("cards", rows["cards"])):
        if found and target.records().fetch(
            t.sql(f"SELECT 1 FROM {{{table}}} WHERE id = ? AND collection = ?"), (found[0][0], collection)
        ):
            return True
    return False


def _shares_ids(source: Store, target: Store, collection: str, name: str, *, sameness: str) -> bool:
    """Whether a copy as ``name`` must give its runs and cards new ids (they are keys of a
    whole records storage): within one store, or into a target that sees the source's own
    records (``"unknown"`` or even ``"different"`` stores sharing one records file)."""
    if sameness == "same":
        return True
    if name == collection:
        return False
    shared = _records_shared(source, target, collection)
    if shared:
        log.info("the target's records hold %r's own runs or cards: the copy %r gets new run and card ids", collection, name)
    return shared


def _prepare_target(source: Store, target: Store, collection: str, target_name: str, *, replace: bool) -> None:
    info = source.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist in the source store")
    existing = target.get_collection(target_name)
    if existing is not None:
        resuming = read_settings(target, target_name).copy_in_progress is not None
        if replace:
            target.delete_collection(target_name)
            RefineryStore(target.records()).delete_collection(target_name)
            existing = None
        elif not resuming and (existing.chunks or existing.sources):
            raise ConflictError(
                f"collection {target_name!r} in the target store already holds {existing.chunks} chunks "
                f"of {existing.sources} sources: pass --replace (replace=True) to overwrite it"
            )
    target.ensure_collection(target_name)
    recorded = (
        (existing.embedder_provider or "", existing.embedder_model, existing.dimension) if existing is not None else None
    )
    wanted = (info.embedder_provider or "", info.embedder_model, info.dimension)
    # A resumed copy's target already records the model: setting it again would (on
    # PostgreSQL) rebuild the HNSW index over every chunk copied so far, in one
    # transaction under the statement timeout; the deferred-index block builds it once.
    if info.embedder_model is not None and recorded != wanted:
        target.set_embedder(
            target_name, provider=info.embedder_provider or "", model=info.embedder_model, dimension=info.dimension
        )
    marker = {"collection": collection, "startedAt": datetime.now(UTC).isoformat(timespec="seconds")}
    if read_settings(target, target_name).copy_in_progress is None:
        write_settings(target, target_name, copy_in_progress=marker)


def copy_collection(
    source: Store,
    target: Store,
    collection: str,
    *,
    target_name: str | None = None,
    replace: bool = False,
    verify: bool = True,
    sample_queries: int = 20,
    batch_chunks: int = 2000,
    progress: CopyProgress | None = None,
    embedder: str | None = None,
    embedder_is_default: bool = False,
) -> CopyReport:
    """Copy ``collection`` from ``source`` to ``target`` (as ``target_name``, default the
    same name); see the module docstring. Raises :class:`ConflictError` for a non-empty
    target collection that is not an unfinished copy, unless ``replace``. A target that
    writes many sources in one transaction (:class:`~plait.stores.base.BulkStore`:
    PostgreSQL) gets whole sources in batches of about ``batch_chunks`` chunks.

    ``embedder`` (a name, as ``--embedder``) must be the model of the collection's vectors
    (:class:`~plait.errors.ModelMismatchError` otherwise, nothing written); a collection
    never embedded records it on the copy (:func:`check_copy_embedder`).
    ``embedder_is_default``: it is ``PLAIT_EMBEDDER``'s, not named for this copy; another
    model is then left out (:mod:`plait.carried_model`)."""
    if target_name is not None and target_name != collection:  # a new name (the source's was accepted)
        check_new_collection(target, target_name)
    name = target_name or collection
    if batch_chunks < 1:
        raise ValidationError(f"batch_chunks must be at least 1, got {batch_chunks}")
    record = None if embedder is None else check_copy_embedder(source, collection, embedder, default=embedder_is_default)
    sameness = store_sameness(source, target)
    shared = sameness == "same"
    if shared and name == collection:
        clone = (
            "; if they are two independent PostgreSQL clusters sharing one system_identifier (a server "
            "restored from the other's physical backup, a promoted standby), move the collection by archive: "
            "plait export on the source, plait import --replace on the target"
            if callable(getattr(target, "identity", None))
            else ""
        )
        raise ValidationError(
            f"the source and the target are the same store: copying {collection!r} onto itself would "
            "delete or move it; only a copy under another name (target_name) is allowed within one store" + clone
        )
    if sameness == "unknown" and name == collection and replace and may_be_one_collection(source, target, name):
        raise ValidationError(
            f"cannot tell whether the source and the target are one store, and collection {collection!r} on "
            "both may be one collection: --replace (replace=True) could delete the source; copy under "
            "another name (--as, target_name), or delete the target's collection there yourself first"
        )
    if name == collection and is_one_collection(source, target, collection, name):
        raise ValidationError(
            f"collection {collection!r} of the target is the source's collection itself (a token written into it "
            "through the target was read back through the source): the two addresses reach one store (a port "
            "forward, proxy, load balancer or NAT?); nothing was deleted or copied. Copy under another name "
            "(--as, target_name) within that store instead"
        )
    before = source.get_collection(collection)
    started = time.perf_counter()
    shared = _shares_ids(source, target, collection, name, sameness=sameness)
    _prepare_target(source, target, collection, name, replace=replace)
    renames = _card_renames(source, collection, name, shared=shared)
    sources = source.list_sources(collection)
    present = {s.source_id for s in target.list_sources(name)}  # a resumed copy's sources
    copied = already = chunks = vectors = 0
    bulk = target if isinstance(target, BulkStore) else None
    pending: list[SourceWrite] = []
    batched = 0  # chunks in ``pending``
    reported = 0  # sources given to ``progress``: only once their batch is written

    def flush(done: int) -> None:
        nonlocal pending, batched, reported
        if pending and bulk is not None:
            bulk.replace_sources(name, pending)
        pending, batched = [], 0
        if progress is not None:
            for at in range(reported + 1, done + 1):
                progress(at, len(sources), chunks)
        reported = done

    with bulk.deferred_index(name) if bulk is not None else nullcontext():
        for done, info in enumerate(sources, start=1):
            written = renames.sources.get(info.source_id, info.source_id)
            if written in present and _same_state(source, target, collection, name, info.source_id, renames):
                already += 1
            else:
                items = read_source(source, collection, info.source_id)
                if written != info.source_id:
                    items = _renamed_source(items, renames, info.source_id)
                if bulk is None:
                    target.replace_source(name, written, info.scope, items, root=info.root)
                else:
                    pending.append(SourceWrite(written, info.scope, items, info.root))
                    batched += len(items)
                copied += 1
                chunks += len(items)
                vectors += sum(1 for item in items if item.vector is not None)
            if bulk is None or batched >= batch_chunks or done == len(sources):
                flush(done)
    for scope in source.scopes(collection):
        if scope.last_indexed_at is not None:
            target.mark_scope_indexed(name, scope.scope, scope.last_indexed_at)
    restore_settings(target, name, portable_settings(source, collection))
    if renames.chunks:  # the copy hides its own card chunks
        hidden = dict(read_settings(target, name).search_hidden)
        if CARD_SCOPE in hidden:
            hidden[CARD_SCOPE] = sorted(renames.chunks.get(cid, cid) for cid in hidden[CARD_SCOPE])
            write_settings(target, name, search_hidden=hidden)
    if record is not None and embedder is not None:  # a collection never embedded
        target.set_embedder(name, provider=record.provider, model=record.model, dimension=record.dimension)
        write_settings(target, name, embedder=embedder.strip().lower())
    runs, cards, keys = _copy_records(source, target, collection, name, shared=shared)
    usage = 0
    marker = read_settings(target, name).copy_in_progress or {}
    if not marker.get("usageCopied"):  # added once: a resume must not add them again
        usage = copy_usage(source, target, collection, target_name=name, marker={**marker, "usageCopied": True})
    seconds = time.perf_counter() - started
    checked = verify_copy(source, target, collection, target_name=name, sample_queries=sample_queries) if verify else None
    held = before.chunks if before is not None else 0
    if checked is not None and checked.ok and held and (checked.source_chunks != held or copied + already == 0):
        # the comparison cannot vouch for a copy whose source changed under it (or is its target)
        log.warning(
            "copy of %s not verified: the source held %d chunks when the copy started and %d at its end, "
            "%d sources were copied and %d found already there",
            collection, held, checked.source_chunks, copied, already,
        )
        checked = checked.model_copy(update={"ok": False})
    write_settings(target, name, copy_in_progress=None)  # finished: a later copy into it is refused again
    log.info("copied %s: %d sources, %d chunks in %.1f s", collection, copied, chunks, seconds)
    return CopyReport(
        collection=collection,
        target_collection=name,
        sources_copied=copied,
        sources_already_there=already,
        chunks_copied=chunks,
        vectors_copied=vectors,
        runs=runs,
        cards=cards,
        keys=keys,
        usage_rows=usage,
        seconds=round(seconds, 3),
        chunks_per_second=round(chunks / seconds, 1) if seconds > 0 else 0.0,
        verification=checked,
    )


def copy_usage(
    source: Store,
    target: Store,
    collection: str,
    *,
    target_name: str | None = None,
    marker: dict[str, Any] | None = None,
) -> int:
    """Add the source collection's usage rows (``plait usage``, its history of provider
    calls) to the target collection's, and return how many rows that was. The rows are
    added to what the target holds (its own calls in the same hour stay counted):
    :func:`copy_collection` calls this once per copy with ``marker``, the copy marker
    saying so, written in the same transaction of the target as the rows
    (``Store.add_usage(settings=...)``): a crash leaves both or neither, so a resumed
    copy adds them once."""
    name = target_name or collection
    rows = source.usage(collection)
    update = settings_update(copy_in_progress=marker) if marker is not None else None
    target.add_usage(name, rows, settings=update)
    return len(rows)


def _renamed_id(old: Any, name: str) -> Any:
    """A run or card id for the copy named ``name`` within one store (deterministic, so a
    resumed copy inserts nothing twice)."""
    if old is None:
        return None
    return hashlib.sha256(f"{name}\0{old}".encode()).hexdigest()[:32]


def _copy_records(source: Store, target: Store, collection: str, name: str, *, shared: bool) -> tuple[int, int, int]:
    """Runs, cards and API keys of ``collection`` into ``target`` as ``name``: rows are
    inserted (the source's are never updated or moved). Within one store (``shared``) the
    runs and cards get new ids, and the collection's own API keys stay with it (a key's
    token names one collection; ``*`` keys cover the copy already)."""
    if name == collection:
        return copy_records(source.records(), target.records(), collection)
    rows = collection_records(source.records(), collection)
    for run in rows["runs"]:
        run[1] = name
        if shared:
            run[0] = _renamed_id(run[0], name)
    for card in rows["cards"]:
        card[1] = name
        if shared:
            card[0], card[7] = _renamed_id(card[0], name), _renamed_id(card[7], name)
    if shared:
        rows["keys"] = []
    else:
        for key in rows["keys"]:
            if key[4] == collection:
                key[4] = name
    return write_records(target.records(), rows)


def _as_copied(hits: Sequence[tuple[str, float]], renames: _Renames) -> list[tuple[str, float]]:
    """Source hits under the ids the copy holds them by."""
    return [(renames.chunks.get(cid, cid), score) for cid, score in hits]


def _ranked(hits: Sequence[tuple[str, float]]) -> list[str]:
    """Chunk ids in score order, equal scores (to 4 decimals) by id."""
    return [cid for cid, _ in sorted(hits, key=lambda h: (-round(h[1], 4), h[0]))]


def verify_copy(
    source: Store, target: Store, collection: str, *, target_name: str | None = None, sample_queries: int = 20
) -> CopyVerification:
    """Compare a collection on two stores (see the module docstring)."""
    name = target_name or collection
    sameness = store_sameness(source, target)
    if name == collection and sameness == "same":
        raise ValidationError(f"verify_copy would compare {collection!r} with itself: the two stores are the same store")
    shared = _shares_ids(source, target, collection, name, sameness=sameness)
    renames = _card_renames(source, collection, name, shared=shared)
    a, b = source.get_collection(collection), target.get_collection(name)
    if a is None or b is None:
        raise NotFoundError(f"collection {collection!r} is missing on one side of the copy")
    mismatched = [
        s.source_id
        for s in source.list_sources(collection)
        if source_checksum(source, collection, s.source_id, rename=renames.chunks)
        != source_checksum(target, name, renames.sources.get(s.source_id, s.source_id))
    ]
    ids = source.chunk_ids(collection)
    step = max(1, len(ids) // max(1, sample_queries))
    sample = ids[::step][:sample_queries]
    chunks = source.get_chunks(collection, sample)
    differ: list[str] = []
    for chunk_id in sample:
        chunk = chunks[chunk_id]
        query = analyse_query(" ".join(chunk.content.split()[:_QUERY_WORDS]))
        # the production path (limit=_TOP), exact on every store
        left = _as_copied(source.lexical_search(collection, query.exact, query.stems, limit=_TOP), renames)
        right = target.lexical_search(name, query.exact, query.stems, limit=_TOP)
        if _ranked(left) != _ranked(right):
            differ.append(f"lexical: {chunk_id}")
        found = source.vectors_by_hash(collection, [chunk.content_hash]).get(chunk.content_hash)
        if found is not None:
            vector = np.asarray(found, dtype=np.float32)
            # limit=None: an exact ranking on every backend (an ANN index may miss a neighbour)
            if _ranked(_as_copied(source.vector_search(collection, vector, limit=None), renames))[:_TOP] != _ranked(
                target.vector_search(name, vector, limit=None)
            )[:_TOP]:
                differ.append(f"dense: {chunk_id}")
    records = [_record_counts(source, collection), _record_counts(target, name)]
    ok = (
        (a.chunks, a.sources, a.chunks_without_vector) == (b.chunks, b.sources, b.chunks_without_vector)
        and not mismatched
        and not differ
        and records[0] == records[1]
    )
    return CopyVerification(
        source_chunks=a.chunks,
        target_chunks=b.chunks,
        source_sources=a.sources,
        target_sources=b.sources,
        source_without_vector=a.chunks_without_vector,
        target_without_vector=b.chunks_without_vector,
        checksum_mismatches=mismatched,
        queries=len(sample),
        query_mismatches=differ,
        source_records=records[0],
        target_records=records[1],
        ok=ok,
    )


def _record_counts(store: Store, collection: str) -> list[int]:
    rows = collection_records(store.records(), collection)
    return [len(rows["runs"]), len(rows["cards"])]
