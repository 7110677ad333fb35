"""The one service every interface (Python, CLI, HTTP, MCP, web) is a thin adapter over.

>>> engine = Plait(store="./.plait/plait.db")          # doctest: +SKIP
>>> engine.index("examples/")                          # doctest: +SKIP
>>> engine.search("what does ERR-4012 mean").hits[0]   # doctest: +SKIP

The embedder of a collection is fixed when it is first indexed: later calls that name
no embedder use the recorded one, and naming another model is refused.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from plait._text import valid_text
from plait.backfill import DEFAULT_BACKFILL_BATCH, BackfillProgress, vector_coverage
from plait.chunking import ChunkSettings
from plait.config import Settings
from plait.embeddings import DEFAULT_EMBEDDER, Embedder, make_embedder
from plait.embeddings.guard import (
    DEFAULT_PROBE_INTERVAL,
    DEFAULT_QUERY_DEADLINE,
    GuardedEmbedder,
    QueryGuard,
)
from plait.errors import ConfigError, NotFoundError, PlaitError
from plait.ingest import Indexer, Progress, check_model
from plait.llm import LLM, make_llm
from plait.rerank import Reranker, make_reranker
from plait.search import SearchRequest, SearchService
from plait.sources.base import Scan, SourceDocument
from plait.sources.roots import describe_root, open_root, root_key
from plait.sources.sessions import DEFAULT_SESSION_SCOPE
from plait.sources.walks import RootWalk, WalkCache, collection_state
from plait.stores import Store, open_store
from plait.retrieval.request import validated
from plait.snippets import with_snippets
from plait.types import CollectionInfo, DeletedCollection, IndexReport, SearchResult

if TYPE_CHECKING:
    from plait.ask import AskRequest, AskResult
    from plait.calibration import Calibration
    from plait.coverage import CoverageReport
    from plait.explain import ExplainResult
    from plait.refinery import Refinery

__all__ = ["Plait"]

_NONE = "none"

logger = logging.getLogger(__name__)


def _backfill_batch(value: int | None) -> int:
    """``value``, else ``PLAIT_BACKFILL_BATCH``, else the default; must be >= 1."""
    if value is None:
        raw = os.environ.get("PLAIT_BACKFILL_BATCH", "").strip()
        if not raw:
            return DEFAULT_BACKFILL_BATCH
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"PLAIT_BACKFILL_BATCH must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ConfigError(f"the backfill batch must be >= 1 chunk, got {value}")
    return value


class Plait:
    """Index sources into collections and search them.

    ``embedder`` is a name (``e5``, ``minilm``, ``ollama``, ``openai``, ``none``, ``fake``)
    or an :class:`Embedder`; None uses each collection's recorded embedder, or the
    default for a new collection.
    """

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        embedder: str | Embedder | None = None,
        chunk_settings: ChunkSettings | None = None,
        llm: str | LLM | None = None,
        cross_encoder: str | Path | Reranker | None = None,
        create_store: bool = True,
        query_deadline: float = DEFAULT_QUERY_DEADLINE,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
        keys: str | Path | None = None,
        backfill_batch: int | None = None,
        walk_max_age: float = 0.0,
    ) -> None:
        """``llm`` (a provider name or an :class:`~plait.llm.LLM`; None reads ``PLAIT_LLM``)
        serves ``rerank="llm"``; ``cross_encoder`` (a model directory, a package name or a
        reranker; None reads ``PLAIT_CROSS_ENCODER``) serves ``rerank="cross-encoder"``.
        Neither is built until first used. ``create_store=False`` refuses to create a
        SQLite store that does not exist (``NotFoundError``). Each query embedding is
        bounded by ``query_deadline`` seconds in total, and after a provider failure
        searches go lexical at once until a probe (every ``probe_interval`` seconds)
        succeeds (:mod:`plait.embeddings.guard`). ``keys`` names an API key file whose
        keys for a deleted collection are revoked (as are those of ``PLAIT_KEYS`` and of
        ``keys.db`` next to the store). ``backfill_batch`` (None reads
        ``PLAIT_BACKFILL_BATCH``, default 32) is how many chunks the backfill embeds and
        commits at a time: the most a crash can lose. With ``walk_max_age`` > 0 (``plait
        serve`` and ``plait mcp`` use :data:`~plait.sources.walks.DEFAULT_MAX_AGE`) coverage
        and explain reuse one walk of each recorded root while the collection is unchanged,
        for at most that many seconds (:mod:`plait.sources.walks`); 0 walks on every call."""
        self._query_guard = QueryGuard(deadline=query_deadline, probe_interval=probe_interval)
        self._keys = Path(keys) if keys is not None else None
        self.backfill_batch = _backfill_batch(backfill_batch)
        self.walks = WalkCache(max_age=walk_max_age)
        if store is None or isinstance(store, str):
            store = open_store(Settings.resolve(store=store).store, create=create_store)
        self.store: Store = store
        self._reindex_lock = threading.Lock()
        self._embedder_choice = embedder
        self._embedders: dict[str, Embedder | None] = {}
        self.chunk_settings = chunk_settings or ChunkSettings()
        self._llm_choice = llm
        self._llm: LLM | None = None
        self._llm_resolved = False
        self._cross_encoder_choice = cross_encoder
        self._rerankers: dict[str, Reranker] = {}
        self._search = SearchService(store, rerankers=self.reranker)
        self._refinery: Refinery | None = None
        self._refinery_lock = threading.Lock()

    # embedders ------------------------------------------------------------------
    def _by_name(self, name: str) -> Embedder | None:
        if name not in self._embedders:
            self._embedders[name] = make_embedder(name)
        return self._embedders[name]

    def embedder_for(
        self, collection: str, *, info: CollectionInfo | None = None
    ) -> tuple[Embedder | None, str]:
        """The embedder to use for a collection, and its name.

        ``info`` is the collection as the caller just read it (saves reading it again).
        """
        choice = self._embedder_choice
        if isinstance(choice, str):
            return self._by_name(choice), choice
        if choice is not None:
            return choice, choice.provider
        if info is None:
            info = self.store.get_collection(collection)
        recorded = self.store.get_settings(collection).get("embedder") if info else None
        name = recorded or DEFAULT_EMBEDDER
        return self._by_name(name), name

    # LLM and rerankers ----------------------------------------------------------
    @property
    def llm(self) -> LLM | None:
        """The chat LLM (``Plait(llm=...)``, else ``PLAIT_LLM``), built once; None if none."""
        if not self._llm_resolved:
            choice = self._llm_choice
            self._llm = choice if choice is not None and not isinstance(choice, str) else make_llm(choice)
            self._llm_resolved = True
        return self._llm

    def reranker(self, method: str) -> Reranker:
        """The reranker for ``method`` (``llm`` or ``cross-encoder``), built once."""
        if method not in self._rerankers:
            llm = self.llm if method == "llm" else None
            self._rerankers[method] = make_reranker(
                method,
                llm=llm if llm is not None else "none",  # resolved already: no second env read
                cross_encoder=self._cross_encoder_choice,
            )
        return self._rerankers[method]

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
        )
        return indexer, name

    def _remember(self, collection: str, name: str, root: Mapping[str, Any] | None) -> None:
        settings = self.store.get_settings(collection)
        update: dict[str, Any] = {}
        if name != _NONE and not settings.get("embedder"):
            update["embedder"] = name
        if root is not None:
            roots = [r for r in settings.get("roots", []) if root_key(r) != root_key(root)]
            update["roots"] = [*roots, dict(root)]
        if update:
            self.store.update_settings(collection, update)

    @staticmethod
    def scan(path: str | Path, *, scope: str | None = None, **options: Any) -> tuple[Scan, dict[str, Any]]:
        """A source for a path and its root record (see :func:`describe_root`)."""
        root = describe_root(path, scope=scope, **options)
        return open_root(root).scan(), root

    def _index_root(
        self,
        collection: str,
        root: dict[str, Any],
        progress: Progress | None,
        *,
        allow_empty: bool = False,
        backfill: bool,
        embed_progress: BackfillProgress | None,
        stop: threading.Event | None,
    ) -> IndexReport:
        scan = open_root(root).scan()
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, root)
        return indexer.index(
            collection,
            scan,
            progress=progress,
            root=root_key(root),
            allow_empty=allow_empty,
            backfill=backfill,
            embed_progress=embed_progress,
            stop=stop,
        )

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
        """
        root = describe_root(
            path, ref=ref, globs=globs, scope_rules=scope_rules, max_bytes=max_bytes, scope=scope
        )
        return self._index_root(
            collection, root, progress, allow_empty=allow_empty, backfill=backfill,
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
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, None)
        return indexer.index(
            collection,
            documents,
            progress=progress,
            backfill=backfill,
            embed_progress=embed_progress,
            stop=stop,
        )

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
        return indexer.backfill_report(collection, progress=progress, stop=stop)

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

    def recorded_roots(
        self, collection: str, *, source: str | Path | None = None
    ) -> list[dict[str, Any]]:
        """The roots recorded for a collection; only those at ``source`` when given."""
        roots: list[dict[str, Any]] = list(self.store.get_settings(collection).get("roots", []))
        if source is None:
            return roots
        wanted = str(Path(source).expanduser().resolve())
        chosen = [r for r in roots if r.get("path") == wanted]
        if not chosen:
            known = ", ".join(sorted({str(r.get("path")) for r in roots})) or "none"
            raise NotFoundError(
                f"{wanted} is not a recorded source of collection {collection!r} (recorded: {known})"
            )
        return chosen

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
        yields lose their chunks. ``scope`` and ``source`` (a recorded root's path) narrow
        the run. ``full`` embeds every chunk of the selected roots' sources (of ``scope``
        when given) again, unchanged ones included, reusing no stored vector; each source
        is still replaced in one store write, old chunks and vectors or new, so a run
        killed at any point leaves no source empty or half-written, and running it again
        completes. Its report counts chunks as an incremental run does (``chunksUnchanged``
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
        roots = self.recorded_roots(collection, source=source)
        indexer, _ = self._indexer(collection, reuse_vectors=not full)
        report: IndexReport | None = None
        for root in roots:
            scan = open_root(root).scan()
            part = indexer.index(
                collection,
                scan,
                progress=progress,
                root=root_key(root),
                scope=scope,
                allow_empty=allow_empty,
                backfill=False,
            )
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
        return report

    @valid_text
    def calibrate(
        self, *, collection: str = "default", samples: int = 200, save: bool = True
    ) -> Calibration:
        """Choose the collection's dense weight on pseudo-queries drawn from its own chunks.

        No relevance labels are read (see :mod:`plait.calibration`). With ``save`` the
        weight goes into the collection's fusion settings (``denseWeight``, used by the
        ``minmax``, ``dbsf`` and ``adaptive`` fusions) and the figures under
        ``calibration``.
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
        if save:
            fusion = dict(self.store.get_settings(collection).get("fusion", {}))
            fusion["denseWeight"] = result.dense_weight
            self.store.update_settings(collection, {"fusion": fusion, "calibration": to_json(result)})
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

    def _walker(self, collection: str) -> Callable[[Mapping[str, Any]], RootWalk]:
        """What a recorded root yields now, from the walk cache (see :mod:`plait.sources.walks`)."""
        from plait.coverage import _chunk_keys

        state = collection_state(self.store, collection)
        keys = _chunk_keys(self.chunk_settings)

        def walk(root: Mapping[str, Any]) -> RootWalk:
            return self.walks.get(root, state=state, chunk_keys=keys, settings_key=self.chunk_settings)

        return walk

    def _generated_sources(self, collection: str) -> dict[str, list[SourceDocument]] | None:
        """The documents the engine itself indexes: the FAQ cards that are not rejected.

        The refinery is consulted only when the collection holds card sources or a
        refinery exists (opening one creates its database file).
        """
        from plait.refinery.cards import card_document
        from plait.refinery.models import CARD_SCOPE, CardStatus
        from plait.refinery.store import default_refinery_path

        exists = self._refinery is not None or default_refinery_path(getattr(self.store, "path", None)).exists()
        if not exists and not self.store.list_sources(collection, CARD_SCOPE):
            return None
        cards = self.refinery.cards(collection)
        return {CARD_SCOPE: [card_document(c) for c in cards if c.status != CardStatus.REJECTED]}

    # searching ------------------------------------------------------------------
    @valid_text
    def search(
        self,
        query: str,
        *,
        collection: str = "default",
        k: int = 8,
        fusion: str | None = None,
        lexical_weight: float | str | None = None,
        rrf_k: int | None = None,
        overfetch: int | None = None,
        threshold: float | None = None,
        scopes: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        rerank: str | None = None,
        k_overfetch: int | None = None,
        offset: int = 0,
        qa_first: bool = False,
        language_prior: bool | None = None,
    ) -> SearchResult:
        """Hybrid search: both arms over-fetch, fusion, then the top-``k`` cut.

        ``lexical_weight`` is 0..1 or ``"auto"`` (identifier-aware, see
        :mod:`plait.autoweight`). ``rerank`` (``"llm"`` or ``"cross-encoder"``) reorders
        the fused top ``max(k, k_overfetch)`` (default 20) before the cut. ``offset``
        pages: the hits are fused positions ``offset + 1 … offset + k``. ``qa_first``
        answers with a matching FAQ card when there is one (``answered_by``/``card``,
        see :mod:`plait.refinery.cards`), else with the hybrid search. ``language_prior``
        False makes ``adaptive`` ignore the embedder's declared languages (see
        :class:`~plait.types.FusionSettings`).
        """
        request = {
            "query": query,
            "k": k,
            "fusion": fusion,
            "lexicalWeight": lexical_weight,
            "rrfK": rrf_k,
            "overfetch": overfetch,
            "threshold": threshold,
            "languagePrior": language_prior,
            "scopes": list(scopes) if scopes else None,
            "metadata": dict(metadata) if metadata else None,
            "rerank": rerank,
            "offset": offset,
        }
        if k_overfetch is not None:
            request["kOverfetch"] = k_overfetch
        if qa_first:
            request["qaFirst"] = True
        return self.search_request(collection, request)

    @valid_text
    def search_request(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        drafts_visible: bool = True,
    ) -> SearchResult:
        """Search with a request model (or its camelCase JSON form).

        ``drafts_visible=False`` (a reader over HTTP or MCP) hides the FAQ cards not yet
        approved from a search that names the ``faq-card`` scope."""
        info = self.store.get_collection(collection)
        if info is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        if _wants_qa_first(request):
            return self.refinery.search(collection, request)
        embedder, name = self.embedder_for(collection, info=info)
        check_model(self.store, collection, embedder, info=info)
        note = "embedder 'none' selected (lexical only)" if name == _NONE else None
        guarded = self._guarded(embedder, info)
        hidden = frozenset() if drafts_visible else self._draft_card_chunks(collection, request)
        result = self._search.search(
            collection, request, embedder=guarded, embedder_note=note, info=info, also_hidden=hidden
        )
        empty = self._empty_scopes(collection, validated(request).scopes)
        if empty:
            result = result.model_copy(update={"notes": [*result.notes, empty]})
        return with_snippets(result)

    def _empty_scopes(self, collection: str, scopes: Sequence[str] | None) -> str | None:
        """A note naming the asked scopes that hold no chunk, and the scopes that do."""
        if not scopes:
            return None
        counts = {s.scope: s.chunks for s in self.store.scopes(collection) if s.chunks}
        missing = [name for name in scopes if name not in counts]
        if not missing:
            return None
        held = ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"
        names = ", ".join(repr(name) for name in missing)
        noun = "scope" if len(missing) == 1 else "scopes"
        return f"{noun} {names} {'has' if len(missing) == 1 else 'have'} no chunks in collection {collection!r} (chunks per scope: {held})"

    def _draft_card_chunks(self, collection: str, request: SearchRequest | Mapping[str, Any]) -> frozenset[str]:
        """Chunk ids of the collection's draft FAQ cards when ``request`` names their scope."""
        from plait.refinery.cards import card_source_id
        from plait.refinery.models import CARD_SCOPE, CardStatus
        from plait.refinery.store import default_refinery_path

        scopes = request.scopes if isinstance(request, SearchRequest) else request.get("scopes")
        if not scopes or CARD_SCOPE not in scopes:
            return frozenset()
        if self._refinery is None and not default_refinery_path(getattr(self.store, "path", None)).exists():
            return frozenset()
        ids: set[str] = set()
        for card in self.refinery.cards(collection, status=CardStatus.DRAFT):
            ids.update(self.store.chunk_ids(collection, card_source_id(card.id)))
        return frozenset(ids)

    def _guarded(self, embedder: Embedder | None, info: CollectionInfo) -> Embedder | None:
        """The embedder with its query embeddings bounded and circuit-broken."""
        if embedder is None:
            return None
        return cast(Embedder, GuardedEmbedder(embedder, self._query_guard, dimension=info.dimension))

    @valid_text
    def explain(
        self,
        query: str,
        *,
        doc: str | None = None,
        path: str | None = None,
        chunk: str | None = None,
        collection: str = "default",
        **options: Any,
    ) -> ExplainResult:
        """Why a document did (not) come back for ``query``: every stage, and a diagnosis.

        Name the document by exactly one of ``doc`` (metadata ``docId`` or source id),
        ``path`` (source path) or ``chunk`` (chunk id); ``options`` are the search
        options of :meth:`search` (``k``, ``fusion``, ``lexical_weight``, ``rerank``…).
        See :mod:`plait.explain`.
        """
        from plait.explain import explain

        info = self.store.get_collection(collection)
        if info is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        embedder, name = self.embedder_for(collection, info=info)
        check_model(self.store, collection, embedder, info=info)
        note = "embedder 'none' selected (lexical only)" if name == _NONE else None
        request = {"query": query, **_camel_options(options)}
        return explain(
            self._search,
            collection,
            request,
            doc=doc,
            path=path,
            chunk=chunk,
            embedder=self._guarded(embedder, info),
            embedder_note=note,
            roots=self.recorded_roots(collection),
            walk=self._walker(collection),
        )

    # ask and the refinery -------------------------------------------------------
    @property
    def refinery(self) -> Refinery:
        """The Knowledge Refinery (FAQ-card runs and review), opened on first use."""
        with self._refinery_lock:  # two first requests at once must not open it twice
            if self._refinery is None:
                from plait.refinery import Refinery

                self._refinery = Refinery(self)
            return self._refinery

    @valid_text
    def ask(
        self,
        question: str,
        *,
        collection: str = "default",
        k: int | None = None,
        qa_first: bool = False,
        include_drafts: bool | None = None,
        rerank: str | None = None,
        scopes: Sequence[str] | None = None,
        min_cosine: float | None = None,
        min_term_coverage: float | None = None,
    ) -> AskResult:
        """An answer grounded in the collection, with ``[n]`` citations (see :mod:`plait.ask`)."""
        request = {
            "question": question,
            "k": k,
            "qaFirst": qa_first,
            "includeDrafts": include_drafts,
            "rerank": rerank,
            "scopes": list(scopes) if scopes else None,
            "minCosine": min_cosine,
            "minTermCoverage": min_term_coverage,
        }
        return self.ask_request(collection, request)

    @valid_text
    def ask_request(self, collection: str, request: AskRequest | Mapping[str, Any]) -> AskResult:
        """Ask with a request model (or its camelCase JSON form)."""
        from plait.ask import answer_question

        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        return answer_question(self, collection, request)

    # collections ----------------------------------------------------------------
    def collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    @valid_text
    def delete_collection(self, name: str) -> bool:
        """Remove the collection from the store, its refinery runs and FAQ cards, and
        revoke the API keys scoped to it (see :meth:`delete_collection_report`)."""
        return self.delete_collection_report(name).deleted

    @valid_text
    def delete_collection_report(self, name: str) -> DeletedCollection:
        """Delete ``name`` and revoke the keys scoped to it in every key file the engine
        knows (:meth:`key_files`), so a later collection of the same name does not
        inherit old grants; keys for all collections (``*``) are kept."""
        from plait.refinery.store import default_refinery_path

        deleted = self.store.delete_collection(name)
        path = default_refinery_path(getattr(self.store, "path", None))
        if self._refinery is not None or path.exists():
            self.refinery.store.delete_collection(name)
        return DeletedCollection(name=name, deleted=deleted, revoked_keys=self._revoke_keys(name))

    def key_files(self) -> list[Path]:
        """The API key files this engine revokes in: ``keys`` given, ``PLAIT_KEYS``, and
        ``keys.db`` next to the store (each once)."""
        from plait.api.keys import default_keys_path

        store_path = getattr(self.store, "path", None)
        candidates = [
            self._keys,
            Path(env) if (env := Settings.resolve().keys) else None,
            default_keys_path(str(store_path) if store_path is not None else "postgresql://"),
        ]
        out: list[Path] = []
        for candidate in candidates:
            if candidate is not None and candidate.expanduser().absolute() not in {p.absolute() for p in out}:
                out.append(candidate.expanduser())
        return out

    def _revoke_keys(self, collection: str) -> list[int]:
        from plait.api.keys import KeyStore

        revoked: list[int] = []
        for path in self.key_files():
            if not path.exists():  # never create a key file to revoke nothing
                continue
            keys = KeyStore(path)
            try:
                revoked += [key.id for key in keys.revoke_collection(collection)]
            finally:
                keys.close()
        return revoked

    def close(self) -> None:
        if self._refinery is not None:
            self._refinery.close()
        closer = getattr(self._llm, "close", None)
        if callable(closer):
            closer()
        self.store.close()

    def __enter__(self) -> Plait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _camel_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Search keyword options (snake_case, None = unset) as request JSON keys."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        head, *rest = key.split("_")
        out[head + "".join(part.title() for part in rest)] = list(value) if key == "scopes" else value
    return out


def _wants_qa_first(request: SearchRequest | Mapping[str, Any]) -> bool:
    if isinstance(request, SearchRequest):
        return request.qa_first
    return bool(request.get("qaFirst") or request.get("qa_first"))


def _merge(a: IndexReport, b: IndexReport) -> IndexReport:
    """Two reports of one collection as one: counts add up, the later embedding state wins."""
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
    )
