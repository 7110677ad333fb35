"""The indexing half of :class:`plait.service.Plait`: index, backfill, reindex, calibrate,
coverage."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait._text import valid_text
from plait.backfill import BackfillProgress, vector_coverage
from plait.collection_names import check_new_collection
from plait.collection_settings import chunking_record, read_settings, write_settings
from plait.errors import NotFoundError, PlaitError, ValidationError
from plait.ingest import Indexer, Progress
from plait.model_guard import check_model
from plait.service_base import CUSTOM as _CUSTOM
from plait.service_base import NONE as _NONE
from plait.service_base import EngineBase
from plait.sources.base import Scan, SourceDocument
from plait.sources.nesting import check_part, enclosing_root, relative_folder, subtree_of
from plait.sources.roots import describe_root, open_root, root_key
from plait.sources.sessions import DEFAULT_SESSION_SCOPE
from plait.types import IndexReport

if TYPE_CHECKING:
    from plait.ask_gate import Trigger
    from plait.calibration import Calibration
    from plait.coverage import CoverageReport

__all__ = ["IndexingMixin"]

logger = logging.getLogger(__name__)


class IndexingMixin(EngineBase):
    """Write collections: every chunk lexically first, then the vectors behind it."""

    # indexing -------------------------------------------------------------------
    def _indexer(self, collection: str, *, reuse_vectors: bool = True) -> tuple[Indexer, str]:
        embedder, name = self.embedder_for(collection)
        check_model(self.store, collection, embedder)
        indexer = Indexer(
            self.store,
            embedder,
            chunk_settings=self.chunk_settings,
            reuse_vectors=reuse_vectors,
            backfill_batch=self.backfill_batch,
            events=self.events,
        )
        return indexer, name

    def _remember(self, collection: str, name: str | None, root: Mapping[str, Any] | None) -> None:
        """Record what an index run of ``collection`` uses: the embedder's ``name`` (None:
        not recorded by this run), ``root``, and the chunk sizes it cuts with."""
        settings = read_settings(self.store, collection)
        update: dict[str, Any] = {}
        if name is not None and name not in (_NONE, _CUSTOM) and not settings.embedder:
            update["embedder"] = name
        chunking = chunking_record(self.chunk_settings)
        if settings.chunking != chunking:
            update["chunking"] = chunking
        if root is not None:
            roots = [r for r in settings.roots if root_key(r) != root_key(root)]
            update["roots"] = [*roots, dict(root)]
        if update:
            write_settings(self.store, collection, **update)

    @staticmethod
    def scan(path: str | Path, *, scope: str | None = None, **options: Any) -> tuple[Scan, dict[str, Any]]:
        """A source for a path and its root record (see :func:`describe_root`)."""
        root = describe_root(path, scope=scope, **options)
        return open_root(root).scan(), root

    def _index_root(
        self,
        collection: str,
        root: Mapping[str, Any],
        progress: Progress | None,
        *,
        under: str = "",
        allow_empty: bool = False,
        backfill: bool,
        embed_progress: BackfillProgress | None,
        stop: threading.Event | None,
    ) -> IndexReport:
        """Index ``root`` and record it; with ``under`` (a folder of it, ending in ``/``)
        only that folder, as part of the recorded ``root``. Either way the folders of the
        recorded roots nested inside are left to them (:mod:`plait.sources.nesting`)."""
        check_new_collection(self.store, collection)
        subtree, left = subtree_of(root, self._recorded(collection), under=under)
        scan = open_root(root, subtree).scan()
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, None if under else root)
        report = indexer.index(
            collection,
            scan,
            progress=progress,
            root=root_key(root),
            subtree=subtree,
            allow_empty=allow_empty,
            backfill=backfill,
            embed_progress=embed_progress,
            stop=stop,
        )
        part_of = str(root.get("path")) if under else None
        report = report.model_copy(update={"part_of_root": part_of, "nested_roots_left": left})
        return self._estimate_arms(collection, report)

    def _recorded(self, collection: str) -> list[dict[str, Any]]:
        """The collection's recorded roots; none when it does not exist yet."""
        return self.recorded_roots(collection) if self.store.get_collection(collection) is not None else []

    def _estimate_arms(self, collection: str, report: IndexReport, *, force: bool = False) -> IndexReport:
        """After a run: count the chunks it changed (``chunkChanges``, :mod:`plait.staleness`),
        then measure the collection's ask gate (:func:`plait.ask_gate_state.ensure_gate`) and arm
        estimate (:mod:`plait.arm_estimate`) again where they are stale — more than a tenth
        of their chunks changed since, none yet — or ``force`` (a full reindex); the arm
        estimate only when the run left every chunk with a vector. A failure is logged,
        never fails the run."""
        from plait.staleness import record_changes

        changed = report.search_changes  # FAQ cards (hidden from search) are not sampled: not counted
        if changed and self.store.get_collection(collection) is not None:
            record_changes(self.store, collection, changed)
        self._calibrate_gate(collection, report, force=force)
        if report.vectors_complete:  # a skipped file leaves every indexed chunk measurable
            self._measure_arms(collection, force=force)
        return report

    def _measure_arms(self, collection: str, *, force: bool, measured: Calibration | None = None) -> None:
        """The arm estimate again when stale, when it was judged by chunk (an older
        version's, :func:`plait.arm_estimate.judged_by_source`) or ``force``; ``measured`` a
        calibration just made of the same sample size, reused instead of measuring twice."""
        from plait.arm_estimate import MIN_CHUNKS, judged_by_source
        from plait.calibration import estimate_arms
        from plait.staleness import changed_share, is_stale, searchable_count

        settings = read_settings(self.store, collection)
        record = settings.arm_estimate
        info = self.store.get_collection(collection)
        if info is None:
            return
        small = info.chunks < MIN_CHUNKS
        if not force and record is not None and not small and judged_by_source(record):
            at, chunks = record.get("changesAt"), record.get("chunks")
            share = changed_share(
                settings.chunk_changes,
                at if isinstance(at, int) else None,
                chunks if isinstance(chunks, int) else None,
                now=searchable_count(info.chunks, settings),
            )
            if not is_stale(share):
                return
        if not force and record is None and small:
            return  # nothing to measure, nothing to remove
        try:
            embedder, _ = self.embedder_for(collection)
            if embedder is not None:
                estimate_arms(self.store, collection, embedder, changes_at=settings.chunk_changes, measured=measured)
        except PlaitError as exc:
            logger.warning("arm estimate of %r failed: %s", collection, exc)

    def _calibrate_gate(
        self, collection: str, report: IndexReport | None, *, force: bool = False, trigger: Trigger = "index"
    ) -> None:
        """Calibrate ask's gate at the end of a run (``calibratedBy: index``) where it is
        stale (:func:`plait.ask_gate_state.ensure_gate`) or ``force``: with the dense arm when
        every chunk has a vector; a run leaving vectors pending leaves it to the
        backfill's run (or the first ask); a collection without an embedder gets the
        lexical half."""
        from plait.ask_gate_state import ensure_gate

        try:
            embedder, _ = self.embedder_for(collection)
            if embedder is not None and report is not None and not report.vectors_complete:
                return
            with self.metered(collection, "index"):  # its query embeddings are the run's cost
                ensure_gate(self.store, collection, embedder, trigger=trigger, force=force)
        except PlaitError as exc:
            logger.warning("ask gate of %r not calibrated: %s", collection, exc)

    @valid_text
    def index(
        self,
        path: str | Path,
        *,
        collection: str = "default",
        scope: str | None = None,
        ref: str | None = None,
        globs: Sequence[str] | None = None,
        scope_rules: Sequence[tuple[str, str]] | None = None,
        max_bytes: int | None = None,
        progress: Progress | None = None,
        allow_empty: bool = False,
        backfill: bool = True,
        embed_progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Index a folder or git repository of Markdown/text files, or a ``.jsonl`` corpus.

        Every chunk is written, searchable lexically, before any is embedded; then the
        chunks without a vector are embedded in batches committed one by one
        (``embed_progress`` gets (chunks with a vector, chunks)). ``backfill`` False
        returns after the lexical half (the report says vectors are pending;
        :meth:`reindex`, :meth:`backfill` or ``plait serve`` fill them); setting
        ``stop`` ends the backfill after the batch in flight.

        A git working tree, or a folder inside one, is read through git (tracked files only);
        ``ref`` indexes that commit, branch or tag without checking it out. ``globs``,
        ``scope_rules`` (``(prefix, scope)``, first match wins) and ``max_bytes`` apply
        to folders and repositories; ``scope`` to a ``.jsonl`` corpus. The root is
        recorded, and indexing it again deletes the chunks of files it no longer has —
        unless it now yields none at all or part of it cannot be read (then nothing is
        deleted and the kept sources are reported as skipped; ``allow_empty`` deletes).

        A file is indexed once, under one recorded root (:mod:`plait.sources.nesting`): a
        folder inside a recorded root of the same kind and ref is indexed as part of it —
        its options, its source ids, the run (deletions included) restricted to the folder,
        the report's ``part_of_root`` naming it; options that differ from the root's are
        refused (:class:`~plait.errors.ConflictError`) — and a root's runs leave the
        folders of the recorded roots inside it to them (``nested_roots_left``).
        """
        root: Mapping[str, Any] = describe_root(
            path, ref=ref, globs=globs, scope_rules=scope_rules, max_bytes=max_bytes, scope=scope
        )
        outer = enclosing_root(root, self._recorded(collection))
        if outer is not None:
            check_part(root, outer, collection=collection)
            root, under = outer, relative_folder(str(root["path"]), outer)
        else:
            under = ""
        return self._index_root(
            collection, root, progress, under=under, allow_empty=allow_empty, backfill=backfill,
            embed_progress=embed_progress, stop=stop,
        )

    @valid_text
    def index_sessions(
        self,
        path: str | Path,
        *,
        collection: str = "default",
        scope: str = DEFAULT_SESSION_SCOPE,
        progress: Progress | None = None,
        backfill: bool = True,
        embed_progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Index chat/agent session logs (a ``.jsonl`` file or a folder of them).

        Only ``chat.message`` and ``agent.response`` events are indexed; the report's
        ``skipped_by_type`` counts the others, ``skipped`` lists malformed lines.
        ``backfill``, ``embed_progress`` and ``stop`` as for :meth:`index`.
        """
        root = describe_root(path, kind="sessions", scope=scope)
        return self._index_root(
            collection, root, progress, backfill=backfill, embed_progress=embed_progress, stop=stop
        )

    @valid_text
    def index_documents(
        self,
        documents: Iterable[SourceDocument],
        *,
        collection: str = "default",
        progress: Progress | None = None,
        backfill: bool = True,
        embed_progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Index documents built in code (``backfill``, ``embed_progress``, ``stop`` as
        for :meth:`index`)."""
        check_new_collection(self.store, collection)
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, None)
        report = indexer.index(
            collection,
            documents,
            progress=progress,
            backfill=backfill,
            embed_progress=embed_progress,
            stop=stop,
        )
        return self._estimate_arms(collection, report)

    def backfill(
        self,
        *,
        collection: str = "default",
        progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Embed the collection's chunks that have no vector yet (a detached or
        interrupted index resumes here); batches are claimed, so several processes can
        run it at once without embedding a chunk twice."""
        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        indexer, _ = self._indexer(collection)
        return self._estimate_arms(collection, indexer.backfill_report(collection, progress=progress, stop=stop))

    def backfill_pending(
        self, *, stop: threading.Event | None = None, collections: Sequence[str] | None = None
    ) -> dict[str, IndexReport]:
        """:meth:`backfill` every collection (of ``collections`` when given) that has
        chunks without a vector and an embedder; a collection whose backfill fails is
        logged and skipped. Returns the reports by collection."""
        reports: dict[str, IndexReport] = {}
        for info in self.store.list_collections():
            if stop is not None and stop.is_set():
                break
            if (collections and info.name not in collections) or not info.chunks_without_vector:
                continue
            try:
                embedder, _ = self.embedder_for(info.name, info=info)
                if embedder is None:
                    continue
                reports[info.name] = report = self.backfill(collection=info.name, stop=stop)
                logger.info(
                    "backfill of %r: %d embedded, %d still without a vector",
                    info.name, report.embedding.embedded, report.embedding.skipped,
                )
            except PlaitError as exc:
                logger.warning("backfill of %r failed: %s", info.name, exc)
        return reports

    def start_backfill(self) -> tuple[threading.Thread, threading.Event]:
        """Run :meth:`backfill_pending` in a daemon thread (``plait serve`` does); set the
        returned event to stop it after the batch in flight."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.backfill_pending, kwargs={"stop": stop}, name="plait-backfill", daemon=True
        )
        thread.start()
        return thread, stop

    def vector_coverage(self, collection: str = "default") -> float:
        """The share (0..1) of the collection's chunks that have a vector."""
        info = self.store.get_collection(collection)
        if info is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        return vector_coverage(info.chunks, info.chunks_without_vector)
    @valid_text
    def reindex(
        self,
        *,
        collection: str = "default",
        scope: str | None = None,
        source: str | Path | None = None,
        full: bool = False,
        progress: Progress | None = None,
        allow_empty: bool = False,
        backfill: bool = True,
        embed_progress: BackfillProgress | None = None,
        stop: threading.Event | None = None,
    ) -> IndexReport:
        """Re-read recorded roots and backfill missing vectors; idempotent and incremental.

        Every root is written first (searchable lexically), then the missing vectors are
        embedded (``backfill``, ``embed_progress`` and ``stop`` as for :meth:`index`).

        Unchanged chunks keep their vectors (no embedding call); sources a root no longer
        yields lose their chunks; a root leaves the folders of the recorded roots nested
        inside it to them (``nested_roots_left``, :mod:`plait.sources.nesting`). ``scope``
        and ``source`` (a recorded root's path) narrow the run. ``full`` embeds every chunk
        of the selected roots' sources (of ``scope`` when given) again, unchanged ones
        included, reusing no stored vector; each source is still replaced in one store
        write, old chunks and vectors or new, so a run killed at any point leaves no source
        empty or half-written, and running it again completes. Its report counts chunks as an incremental run does (``chunksUnchanged``
        for same id and content, whose vectors were overwritten) and ``embedding.embedded``
        says how many texts were embedded; it is not ``complete`` when the embedder failed
        before everything was embedded again. A root that yields no source where the
        index holds some, or whose walk hit an unreadable folder, deletes nothing (the
        kept sources are reported as skipped, ``complete`` false) unless ``allow_empty``.
        """
        with self._reindex_lock:  # one reindex at a time per engine, whichever interface asks
            return self._reindex(
                collection, scope=scope, source=source, full=full, progress=progress, allow_empty=allow_empty,
                backfill=backfill, embed_progress=embed_progress, stop=stop,
            )

    def _reindex(
        self,
        collection: str,
        *,
        scope: str | None,
        source: str | Path | None,
        full: bool,
        progress: Progress | None,
        allow_empty: bool,
        backfill: bool,
        embed_progress: BackfillProgress | None,
        stop: threading.Event | None,
    ) -> IndexReport:
        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        if scope is not None:
            known = sorted(info.scope for info in self.store.scopes(collection))
            if scope not in known:  # a typo re-read nothing and reported success
                raise ValidationError(
                    f"collection {collection!r} has no scope {scope!r} (its scopes: "
                    f"{', '.join(known) or 'none'}); a reindex without a scope picks up new sources of any scope"
                )
        roots = self.recorded_roots(collection, source=source)
        recorded = self.recorded_roots(collection) if source is not None else roots
        indexer, _ = self._indexer(collection, reuse_vectors=not full)
        if roots:
            self._remember(collection, None, None)
        report: IndexReport | None = None
        for root in roots:
            subtree, left = subtree_of(root, recorded)  # the roots nested inside keep their files
            scan = open_root(root, subtree).scan()
            part = indexer.index(
                collection,
                scan,
                progress=progress,
                root=root_key(root),
                scope=scope,
                subtree=subtree,
                allow_empty=allow_empty,
                backfill=False,
            ).model_copy(update={"nested_roots_left": left})
            report = part if report is None else _merge(report, part)
        if backfill or report is None:
            filled = indexer.backfill_report(collection, progress=embed_progress, stop=stop)
            if report is not None and report.embedding.available and filled.embedding.available:
                # the roots' parts said "pending"; what the backfill left is what counts
                report = report.model_copy(
                    update={"embedding": report.embedding.model_copy(update={"reason": None})}
                )
            report = filled if report is None else _merge(report, filled)
        if full and indexer.embedder is not None and not report.embedding.available:
            report = report.model_copy(update={"complete": False})  # old vectors remain
        return self._estimate_arms(collection, report, force=full)

    @valid_text
    def calibrate(
        self, *, collection: str = "default", samples: int = 200, save: bool = True
    ) -> Calibration:
        """Choose the collection's dense weight on pseudo-queries drawn from its own chunks.

        No relevance labels are read (see :mod:`plait.calibration`). With ``save`` the
        weight goes into the collection's fusion settings (``denseWeight``, used by the
        ``minmax``, ``dbsf`` and ``adaptive`` fusions) and the figures under
        ``calibration``, and the ask gate and the arm estimate are measured again
        (``calibratedBy: calibrate``), however little changed since (:mod:`plait.staleness`).
        When the collection's saved method is ``rrf`` or ``weighted`` its searches do not
        read the weight, and the result's ``not_used`` says so.
        """
        from plait.calibration import calibrate
        from plait.errors import ConfigError
        from plait.types import to_json

        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        embedder, _ = self.embedder_for(collection)
        if embedder is None:
            raise ConfigError(f"collection {collection!r}: calibration needs an embedder (got 'none')")
        check_model(self.store, collection, embedder)
        result = calibrate(self.store, collection, embedder, samples=samples)
        fusion = dict(read_settings(self.store, collection).fusion)
        if save:
            fusion["denseWeight"] = result.dense_weight
            measured = {key: value for key, value in to_json(result).items() if key != "notUsed"}
            write_settings(self.store, collection, fusion=fusion, calibration=measured)
            self._calibrate_gate(collection, None, force=True, trigger="calibrate")
            self._measure_arms(collection, force=True, measured=result)
        method = fusion.get("method")
        if method in ("rrf", "weighted"):
            result = result.model_copy(update={"not_used": (
                f"collection {collection!r} fuses with {method!r} (its saved method), which takes no "
                "denseWeight: its searches use the weight only when they ask for adaptive, minmax or dbsf"
            )})
        return result

    @valid_text
    def coverage(self, *, collection: str = "default") -> CoverageReport:
        """Per scope: sources present against sources with chunks, vectors, model, last index."""
        from plait.coverage import compute_coverage

        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        return compute_coverage(
            self.store,
            collection,
            self.recorded_roots(collection),
            chunk_settings=self.chunk_settings,
            generated=self._generated_sources(collection),
            walk=self._walker(collection),
        )
    def _generated_sources(self, collection: str) -> dict[str, list[SourceDocument]] | None:
        """The documents the engine itself indexes: the FAQ cards that are not rejected.

        The refinery is opened only when the collection holds card sources or cards.
        """
        from plait.refinery.cards import card_document
        from plait.refinery.models import CARD_SCOPE, CardStatus
        from plait.refinery.store import RefineryStore

        if (
            self._refinery is None
            and not self.store.list_sources(collection, CARD_SCOPE)
            and not RefineryStore(self.store.records()).count_cards(collection)
        ):
            return None
        cards = self.refinery.cards(collection)
        return {CARD_SCOPE: [card_document(c) for c in cards if c.status != CardStatus.REJECTED]}


def _merge(a: IndexReport, b: IndexReport) -> IndexReport:
    """Two reports of one collection as one: counts add up, lists (skipped, untracked, the
    sources named) join, the later embedding state wins."""
    emb = b.embedding.model_copy(
        update={
            "embedded": a.embedding.embedded + b.embedding.embedded,
            "reused": a.embedding.reused + b.embedding.reused,
            "deduplicated": a.embedding.deduplicated + b.embedding.deduplicated,
            "calls": a.embedding.calls + b.embedding.calls,
            "available": a.embedding.available and b.embedding.available,
            "reason": b.embedding.reason or a.embedding.reason,
        }
    )
    skipped = [*a.skipped, *b.skipped]
    by_type = dict(a.skipped_by_type)
    for kind, count in b.skipped_by_type.items():
        by_type[kind] = by_type.get(kind, 0) + count
    adr_folders = dict(a.adr_folders)
    for folder, count in b.adr_folders.items():
        adr_folders[folder] = adr_folders.get(folder, 0) + count
    return IndexReport(
        collection=a.collection,
        sources_seen=a.sources_seen + b.sources_seen,
        sources_indexed=a.sources_indexed + b.sources_indexed,
        sources_deleted=a.sources_deleted + b.sources_deleted,
        skipped=skipped,
        skipped_by_type=by_type,
        adr_folders=adr_folders,
        untracked=[*a.untracked, *b.untracked],
        part_of_root=a.part_of_root or b.part_of_root,
        nested_roots_left=[*a.nested_roots_left, *b.nested_roots_left],
        added_sources=[*a.added_sources, *b.added_sources],
        changed_sources=[*a.changed_sources, *b.changed_sources],
        deleted_sources=[*a.deleted_sources, *b.deleted_sources],
        chunks_added=a.chunks_added + b.chunks_added,
        chunks_updated=a.chunks_updated + b.chunks_updated,
        chunks_unchanged=a.chunks_unchanged + b.chunks_unchanged,
        chunks_deleted=a.chunks_deleted + b.chunks_deleted,
        embedding=emb,
        complete=not skipped and emb.skipped == 0,
        elapsed_ms=round(a.elapsed_ms + b.elapsed_ms, 1),
    ).with_hidden_changes(a.hidden_changes + b.hidden_changes)
