"""Ingest: source documents → chunks → analysed fields + vectors → store.

Each document is written with one :meth:`Store.replace_source` call, so a crash
leaves every source with either its old or its new chunks. Vectors are reused, in
this order, from the chunk already stored under the same id and content, then from
any chunk of the collection with the same content hash; only what is left is sent
to the embedder, in batches.

An unchanged source costs one read: when every chunk equals the stored one (and
vectors are reused) the write is skipped, so nothing is analysed, embedded or
committed. A chunk stored with the same content hash is analysed only if the store
reads its lexical fields (it keeps the stored postings otherwise).

When a run names the recorded ``root`` the documents come from, every source is
stored with that root; afterwards the root's stored sources that the run did not
yield (deleted files, vanished sessions, files now binary) lose their chunks — a file
still there but unreadable this time keeps its last good version (``Scan.unread``) — and
a source another root already owns is skipped rather than overwritten.

Lexical first, vectors behind: every chunk is written with both lexical fields as
soon as it is chunked and analysed (with a vector only when one is stored for the same
content), so lexical search answers at once; then :mod:`plait.backfill` embeds the
chunks that lack a vector in claimed batches, each committed on its own. A full
reindex (``reuse_vectors=False``) embeds inline instead: the old vectors stay until
each source's new ones replace them in its one write.

When the embedder fails (down, timing out, answering garbage), indexing goes on:
every chunk is written with its lexical half and no vector, and the report says how
many were skipped and why. Nothing claims "complete" when it was not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from plait.backfill import (
    DEFAULT_BACKFILL_BATCH,
    BackfillProgress,
    run_backfill,
)
from plait.chunk_build import build_chunks, chunk_id, content_hash, index_text
from plait.chunking import ChunkSettings
from plait.collection_settings import read_settings
from plait.embeddings.base import Embedder
from plait.errors import ProviderError
from plait.events import EngineEvents
from plait.fields import embedding_text
from plait.kept_versions import remember_kept
from plait.model_guard import check_model
from plait.sources.base import Scan, SourceDocument, Subtree, kept_skip
from plait.stored_chunk import stored_chunk
from plait.stores.base import ChunkState, SourceInfo, Store
from plait.types import (
    Chunk,
    EmbeddingReport,
    IndexReport,
    SkippedSource,
)
from plait.usage import metering, rows_of

logger = logging.getLogger(__name__)

__all__ = [
    "Indexer",
    "Progress",
    "build_chunks",
    "check_model",
    "chunk_id",
    "content_hash",
    "index_text",
]

Progress = Callable[[int, int, int | None], None]
"""Called with (sources done, chunks written, sources in all) after each document.

When the source knows its file list before reading it (a folder, a git tree: see
``Scan.total``) the first number counts every source read, skipped ones included, and
the third is their total, so a caller can show an ETA; otherwise the first counts the
documents written and the third is None."""


def _indexed(chunk: Chunk) -> str:
    """What the dense arm embeds (:func:`plait.fields.embedding_text`)."""
    return embedding_text(chunk)


def _conflict(source_id: str, owner: str) -> SkippedSource:
    return SkippedSource(
        path=source_id, reason=f"already indexed from another root ({owner}); not overwritten"
    )


@dataclass
class _Run:
    """Mutable counters of one indexing run."""

    report_skipped: list[SkippedSource] = field(default_factory=list)
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0
    reused: int = 0
    calls: int = 0
    docs: int = 0
    sources_deleted: int = 0
    deduplicated: int = 0  # chunks given the vector embedded for an equal text of this run
    added_sources: list[str] = field(default_factory=list)
    changed_sources: list[str] = field(default_factory=list)
    deleted_sources: list[str] = field(default_factory=list)
    available: bool = True
    reason: str | None = None
    scopes: set[str] = field(default_factory=set)
    sources: dict[str, SourceInfo] | None = None  # as stored when the run began; read once
    pending: bool = False  # vectors left to a later backfill (detached)
    written: set[str] = field(default_factory=set)  # source ids this run has handled
    conflicts: list[SkippedSource] = field(default_factory=list)  # lost to another root mid-run
    scan: Scan | None = None  # the scan being indexed, for its counts of sources read and in all
    hidden_scopes: frozenset[str] = frozenset()  # scopes search hides (searchHidden: FAQ cards)
    hidden: int = 0  # chunks added, updated or deleted in those scopes


def _tick(run: _Run, progress: Progress) -> None:
    chunks = run.added + run.updated + run.unchanged
    scan = run.scan
    if scan is not None and scan.total is not None:
        progress(min(scan.seen, scan.total), chunks, scan.total)
    else:
        progress(run.docs, chunks, None)


class Indexer:
    """Writes documents into a collection, embedding what needs it."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        *,
        chunk_settings: ChunkSettings | None = None,
        batch_size: int = 64,
        reuse_vectors: bool = True,
        backfill_batch: int = DEFAULT_BACKFILL_BATCH,
        events: EngineEvents | None = None,
    ) -> None:
        self.events = events or EngineEvents()  # told of embedding calls and provider failures
        self.store = store
        self.embedder = embedder
        self.chunk_settings = chunk_settings or ChunkSettings()
        self.batch_size = batch_size
        self.backfill_batch = backfill_batch
        """Chunks per claimed, separately committed backfill batch."""
        self.reuse_vectors = reuse_vectors
        """False embeds every chunk again, unchanged ones included (their stored vectors
        are overwritten in the same write), and reuses no vector of equal content."""

    # embedding -----------------------------------------------------------------
    def _embed(self, collection: str, texts: list[str], run: _Run) -> np.ndarray | None:
        if self.embedder is None or not run.available or not texts:
            return None
        try:
            run.calls += 1
            started = time.perf_counter()
            with metering("index", detached=True) as (events, _):
                matrix = self.embedder.embed_documents(texts)
        except ProviderError as exc:
            self.events.provider_failed("documents", exc)
            run.available = False
            run.reason = f"{self.embedder.provider}/{self.embedder.model}: {exc}"
            return None
        finally:
            # written beside the batch's chunks (replace_source takes no usage): a separate
            # transaction, unlike the backfill's set_vectors
            self.store.add_usage(collection, rows_of(events))
        self.events.embedded(collection, len(texts), time.perf_counter() - started)
        info = self.store.get_collection(collection)
        dim = int(matrix.shape[1])
        if info is not None and info.dimension not in (None, dim):
            run.available = False
            run.reason = (
                f"{self.embedder.provider}/{self.embedder.model} returned {dim}-d vectors; "
                f"the collection holds {info.dimension}-d vectors"
            )
            return None
        if info is not None and info.dimension is None:
            self.store.set_embedder(
                collection, provider=self.embedder.provider, model=self.embedder.model, dimension=dim
            )
        return matrix

    def _vectors_for(
        self,
        collection: str,
        batch: list[tuple[SourceDocument, list[Chunk]]],
        run: _Run,
        states: Mapping[str, Mapping[str, ChunkState]],
    ) -> dict[str, np.ndarray]:
        """Vectors for the chunks of a batch of documents that need new ones (all of
        them when ``reuse_vectors`` is False); ``states`` are the stored chunks per source."""
        if self.embedder is None:
            return {}
        needing: list[Chunk] = []
        for doc, chunks in batch:
            if not self.reuse_vectors:
                needing.extend(chunks)
                continue
            known = states[doc.source_id]
            for chunk in chunks:
                state = known.get(chunk.id)
                if state and state.content_hash == chunk.content_hash and state.has_vector:
                    continue
                needing.append(chunk)
        vectors: dict[str, np.ndarray] = {}
        hashes = [c.content_hash for c in needing]
        reuse = self.store.vectors_by_hash(collection, hashes) if self.reuse_vectors else {}
        to_embed: dict[str, list[Chunk]] = {}
        for chunk in needing:
            if chunk.content_hash in reuse:
                vectors[chunk.id] = reuse[chunk.content_hash]
                run.reused += 1
            else:
                to_embed.setdefault(chunk.content_hash, []).append(chunk)
        if self.reuse_vectors:
            return vectors  # the rest is embedded by the backfill, after every chunk is written
        texts = [_indexed(group[0]) for group in to_embed.values()]
        matrix = self._embed(collection, texts, run)
        if matrix is not None:
            for row, group in zip(matrix, to_embed.values(), strict=True):
                for chunk in group:
                    vectors[chunk.id] = row
            run.embedded += len(texts)
            run.deduplicated += sum(len(group) - 1 for group in to_embed.values())
        return vectors

    # writing -------------------------------------------------------------------
    def _write(
        self,
        collection: str,
        batch: list[tuple[SourceDocument, list[Chunk]]],
        run: _Run,
        progress: Progress | None,
        root: str,
    ) -> None:
        unchanged = self._unchanged(collection, batch, run, root)
        pending: list[tuple[SourceDocument, list[Chunk]]] = []
        for doc, chunks in batch:
            if doc.source_id in unchanged:
                run.unchanged += len(chunks)  # nothing to write: no analysis, no transaction
                self._done(doc, run, progress)
            else:
                pending.append((doc, chunks))
            run.written.add(doc.source_id)
        # One read of each source's stored chunks serves both the vector reuse and the
        # write (which defers analysing chunks whose content is unchanged).
        states = {doc.source_id: self.store.chunk_states(collection, doc.source_id) for doc, _ in pending}
        vectors = self._vectors_for(collection, pending, run, states)
        for doc, chunks in pending:
            known = states[doc.source_id]
            stored = [stored_chunk(chunk, known.get(chunk.id), vectors.get(chunk.id)) for chunk in chunks]
            counts = self.store.replace_source(
                collection, doc.source_id, doc.scope, stored, root=root, claim=bool(root)
            )
            if counts.conflict is not None:  # another root took it since this run began
                run.conflicts.append(_conflict(doc.source_id, counts.conflict))
                run.written.discard(doc.source_id)
                continue
            if counts.added or counts.updated or counts.deleted:
                (run.changed_sources if known else run.added_sources).append(doc.source_id)
            run.added += counts.added
            run.updated += counts.updated
            run.unchanged += counts.unchanged
            run.deleted += counts.deleted
            if doc.scope in run.hidden_scopes:
                run.hidden += counts.added + counts.updated + counts.deleted
            self._done(doc, run, progress)

    @staticmethod
    def _done(doc: SourceDocument, run: _Run, progress: Progress | None) -> None:
        run.docs += 1
        run.scopes.add(doc.scope)
        if progress is not None:
            _tick(run, progress)

    def _unchanged(
        self, collection: str, batch: list[tuple[SourceDocument, list[Chunk]]], run: _Run, root: str
    ) -> set[str]:
        """The batch's sources whose write would change nothing, so it can be skipped.

        A source qualifies only when vectors are reused (a full reindex writes every
        chunk), this run has not handled it yet (nor does the batch hold it twice), it
        is stored with this run's root and exactly as many chunks, none lacking a vector
        the embedder would add, and every new chunk equals the stored one of its id
        field by field (id, source, content hash, ordinal, scope, origin, metadata: these
        can change while the content does not). One read of the batch's chunks, none per
        source; the source list is read once per run (when a recorded root's run begins,
        else at the first source that could be skipped).
        """
        if not self.reuse_vectors:
            return set()
        need_vector = self.embedder is not None and run.available
        repeated = Counter(doc.source_id for doc, _ in batch)
        candidates = []
        for doc, chunks in batch:
            if not chunks or doc.source_id in run.written or repeated[doc.source_id] > 1:
                continue
            if run.sources is None:  # a root-less run reads the source list only once it may pay
                states = self.store.chunk_states(collection, doc.source_id)
                if len(states) != len(chunks) or (
                    need_vector and not all(s.has_vector for s in states.values())
                ):
                    continue
                run.sources = {s.source_id: s for s in self.store.list_sources(collection)}
            info = run.sources.get(doc.source_id)
            if (
                info is not None
                and info.root == root
                and info.chunks == len(chunks)
                and not (need_vector and info.chunks_without_vector)
            ):
                candidates.append((doc, chunks))
        if not candidates:
            return set()
        stored = self.store.get_chunks(collection, [c.id for _, chunks in candidates for c in chunks])
        return {doc.source_id for doc, chunks in candidates if all(stored.get(c.id) == c for c in chunks)}

    def index(
        self,
        collection: str,
        documents: Scan | Iterable[SourceDocument],
        *,
        progress: Progress | None = None,
        root: str | None = None,
        scope: str | None = None,
        subtree: Subtree | None = None,
        allow_empty: bool = False,
        backfill: bool = True,
        embed_progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Index every document; never raises for a provider failure.

        ``root`` (a recorded root's key) makes the run a sync of that root: see the
        module docstring. ``scope`` restricts the run, deletions included, to one scope;
        ``subtree`` (source ids as paths) to part of the root, skipped files included.
        A root that yields no source where the index holds some (a moved or emptied
        folder, an emptied JSONL file), or whose walk hit an unreadable folder, deletes
        nothing unless ``allow_empty``: the kept sources are reported as skipped. A
        source the walk saw but could not read this time (undecodable, too large,
        unreadable) is skipped and keeps the chunks of its last good version.
        Every chunk is written (searchable) before any is embedded; ``backfill`` False
        returns then, leaving the vectors to a later backfill (the report says they are
        pending), else the backfill runs with ``embed_progress`` and ``stop`` (see
        :func:`plait.backfill.run_backfill`).
        """
        started = time.perf_counter()
        check_model(self.store, collection, self.embedder)
        self.store.ensure_collection(collection)
        info = self.store.get_collection(collection)
        if self.embedder is not None and info is not None and info.embedder_model is None:
            self.store.set_embedder(
                collection,
                provider=self.embedder.provider,
                model=self.embedder.model,
                dimension=self.embedder.dimension,
            )
        run = _Run(
            scan=documents if isinstance(documents, Scan) else None,
            hidden_scopes=frozenset(read_settings(self.store, collection).search_hidden),
        )
        if self.embedder is None:
            run.available = False
            run.reason = "no embedder selected (lexical only)"
        if root is not None:
            run.sources = {s.source_id: s for s in self.store.list_sources(collection)}
        owners = {k: s.root for k, s in (run.sources or {}).items()}
        inside: Callable[[str], bool] = subtree.holds if subtree is not None else lambda _path: True
        conflicts: list[SkippedSource] = []
        yielded: set[str] = set()
        in_scope = 0
        batch: list[tuple[SourceDocument, list[Chunk]]] = []
        pending = 0
        # A source the walk saw but could not read this time (an undecodable byte, grown
        # past the size limit, unreadable; a session with a line cut short) is still there:
        # its last good version stays. Only a session is yielded too (its readable lines):
        # written unless that would delete a chunk the index holds (the unreadable part's).
        unread = documents.unread if isinstance(documents, Scan) else set()
        for doc in documents:
            if (scope is not None and doc.scope != scope) or not inside(doc.source_id):
                continue
            chunks: list[Chunk] | None = None
            if doc.source_id in unread and doc.source_id in (run.sources or {}):
                chunks = build_chunks(doc, self.chunk_settings)
                if set(self.store.chunk_ids(collection, doc.source_id)) - {c.id for c in chunks}:
                    continue
            in_scope += 1
            owner = owners.get(doc.source_id, "")
            if root is not None and owner not in ("", root):
                conflicts.append(_conflict(doc.source_id, owner))
                continue
            yielded.add(doc.source_id)
            if chunks is None:  # built here, after the checks, as for every source read whole
                chunks = build_chunks(doc, self.chunk_settings)
            batch.append((doc, chunks))
            pending += len(chunks)
            if pending >= self.batch_size:
                self._write(collection, batch, run, progress, root or "")
                batch, pending = [], 0
        if batch:
            self._write(collection, batch, run, progress, root or "")
        if progress is not None and run.scan is not None and run.scan.total is not None:
            _tick(run, progress)  # the skipped sources after the last written one count too
        conflicts += run.conflicts  # lost inside the write's own transaction (a concurrent run)
        yielded -= {c.path for c in run.conflicts}
        kept: list[SkippedSource] = []
        held: set[str] = set()
        if root is not None:
            stored = self.store.list_sources(collection, scope, root=root)
            stale = [s for s in stored if s.source_id not in yielded and inside(s.source_id)]
            held = {s.source_id for s in stale if s.source_id in unread}
            stale = [s for s in stale if s.source_id not in held]
            walk_failed = isinstance(documents, Scan) and any(inside(f"{f}/") for f in documents.walk_errors)
            if stale and not allow_empty and (walk_failed or in_scope == 0):
                why = (
                    "part of the root could not be read"
                    if walk_failed
                    else "the root yields no source now where the index holds some"
                )
                kept = [
                    SkippedSource(
                        path=source.source_id,
                        reason=f"kept, not deleted: {why} (reindex with --allow-empty to delete)",
                    )
                    for source in stale
                ]
            else:
                for source in stale:
                    removed = self.store.delete_source(collection, source.source_id)
                    run.deleted += removed
                    run.hidden += removed if source.scope in run.hidden_scopes else 0
                    run.sources_deleted += 1
                    run.deleted_sources.append(source.source_id)
                    run.scopes.add(source.scope)
        skipped = list(documents.skipped) if isinstance(documents, Scan) else []
        skipped = [kept_skip(item) if item.path in held else item for item in skipped if item.path not in yielded]
        if scope is not None and isinstance(documents, Scan):
            skipped = [item for item in skipped if _skipped_scope(item.path, documents, run) in (None, scope)]
        skipped = [item for item in skipped if inside(item.path)] + conflicts
        by_type = dict(documents.skipped_by_type) if isinstance(documents, Scan) else {}
        seen = documents.seen if isinstance(documents, Scan) else run.docs
        if scope is not None or subtree is not None:
            seen = in_scope + len(skipped) - len(conflicts)
        skipped += kept
        now = datetime.now(UTC).isoformat(timespec="seconds")
        for name in sorted(run.scopes):
            self.store.mark_scope_indexed(collection, name, now)
        if root is not None:  # explain says what is kept and why (plait.kept_versions)
            remember_kept(
                self.store,
                collection,
                root,
                held=held,
                skipped=documents.skipped if isinstance(documents, Scan) else [],
                sources=run.sources or {},
                read=(yielded | set(run.deleted_sources)) - held,
                at=now,
            )
        if self.embedder is not None and run.available:
            if backfill:
                self.backfill(collection, run, progress=embed_progress, stop=stop)
            else:
                run.pending = True
        report = self._report(collection, run, seen, skipped, started)
        adr_folders = dict(documents.conventions) if isinstance(documents, Scan) else {}
        untracked = list(documents.untracked) if isinstance(documents, Scan) else []
        if untracked:
            logger.info("%d files under %r match the globs but git does not track them: not indexed",
                        len(untracked), collection)
        return report.model_copy(
            update={"skipped_by_type": by_type, "adr_folders": adr_folders, "untracked": untracked}
        )

    def backfill(
        self,
        collection: str,
        run: _Run | None = None,
        *,
        progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
        wait_for_others: bool = True,
    ) -> int:
        """Embed every chunk of the collection that has no vector yet, in claimed batches
        committed one by one (see :mod:`plait.backfill`); returns how many got one."""
        run = run or _Run()
        if self.embedder is None:
            return 0
        check_model(self.store, collection, self.embedder)
        outcome = run_backfill(
            self.store,
            collection,
            lambda texts: self._embed(collection, texts, run),
            batch_size=self.backfill_batch,
            progress=progress,
            stop=stop,
            wait_for_others=wait_for_others,
        )
        run.embedded += outcome.embedded
        run.reused += outcome.reused
        run.deduplicated += outcome.deduplicated
        if outcome.stopped:
            run.pending = True
        return outcome.filled

    def backfill_report(
        self,
        collection: str,
        *,
        progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Backfill missing vectors and report it like an index run."""
        started = time.perf_counter()
        self.store.ensure_collection(collection)
        run = _Run()
        if self.embedder is None:
            run.available = False
            run.reason = "no embedder selected (lexical only)"
        else:
            check_model(self.store, collection, self.embedder)
            self.backfill(collection, run, progress=progress, stop=stop)
        return self._report(collection, run, 0, [], started)

    def _report(
        self, collection: str, run: _Run, seen: int, skipped: list[SkippedSource], started: float
    ) -> IndexReport:
        without = sum(s.chunks_without_vector for s in self.store.scopes(collection))  # a count, not the rows
        embedding = EmbeddingReport(
            available=run.available and self.embedder is not None,
            embedded=run.embedded,
            reused=run.reused,
            deduplicated=run.deduplicated,
            skipped=without,
            reason=_reason(run, without),
            calls=run.calls,
        )
        logger.info("indexed %r: %d/%d sources, chunks +%d ~%d =%d -%d, %d skipped, %d without a vector", collection,
                    run.docs, seen, run.added, run.updated, run.unchanged, run.deleted, len(skipped), without)
        for item in skipped:
            logger.debug("skipped %s: %s", item.path, item.reason)
        return IndexReport(
            collection=collection,
            sources_seen=seen,
            sources_indexed=run.docs,
            sources_deleted=run.sources_deleted,
            added_sources=run.added_sources,
            changed_sources=run.changed_sources,
            deleted_sources=run.deleted_sources,
            skipped=skipped,
            chunks_added=run.added,
            chunks_updated=run.updated,
            chunks_unchanged=run.unchanged,
            chunks_deleted=run.deleted,
            embedding=embedding,
            complete=not skipped and without == 0,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        ).with_hidden_changes(run.hidden)


def _skipped_scope(path: str, scan: Scan, run: _Run) -> str | None:
    """The scope a skipped source belongs to: the stored one, else the one its path gives
    (:attr:`Scan.path_scope`), else None (unknown: a run of any scope reports it). An
    unreadable folder (``docs/x/``) is None: it holds back deletions in every scope."""
    if path.endswith("/"):
        return None
    stored = (run.sources or {}).get(path)
    if stored is not None:
        return stored.scope
    return scan.path_scope(path) if scan.path_scope is not None else None


def _reason(run: _Run, without: int) -> str | None:
    """Why vectors are missing (None when none are and the embedder worked)."""
    if not run.available:
        return run.reason
    if not without:
        return None
    if run.pending:
        return (
            f"{without} chunks wait for their vectors: the backfill resumes with "
            "'plait reindex' or 'plait serve'"
        )
    return run.reason or f"{without} chunks are still being embedded by another backfill"
