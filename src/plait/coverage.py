"""Coverage: how much of what the sources hold now is in the index — honestly.

The recorded roots of a collection are read again (files are read and chunked, nothing
is embedded or written) and compared with what the store holds, per scope:

- ``sourcesPresent`` — sources (files, sessions, records) the roots yield now;
- ``sourcesIndexed`` — of those, how many have chunks in the store;
- ``sourcesOutdated`` — of those, how many changed since they were indexed (their
  chunks now would differ in id or content);
- ``sourcesVanished`` — sources with chunks that their root no longer yields (a
  reindex deletes them);
- ``sourcesStored``, ``chunks``, ``chunksWithoutVector`` — what the store holds;
- ``embeddingModel`` — the collection's model; ``lastIndexedAt`` — stored by the last
  run that indexed the scope, never guessed.

A number that cannot be backed is ``null``, never a guess: when a root cannot be read
(its folder is gone, git fails), the present / indexed / outdated / vanished figures of
the scopes it feeds are null and the root says why; so are they for a scope holding
sources indexed from code (no root to compare with). Files a root skips are listed per
root with their reasons.

Scopes the engine derives itself are compared with what they derive from: the
``faq-card`` scope with the refinery's cards that are not rejected (each one is indexed
as ``card:<id>``), passed in as ``generated`` documents.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field

from plait.chunk_build import build_chunks
from plait.chunking import ChunkSettings
from plait.errors import NotFoundError
from plait.sources.base import SourceDocument, kept_skip
from plait.sources.roots import root_key
from plait.sources.walks import RootWalk, walk_root
from plait.stores.base import Store
from plait.types import Model, SkippedSource

__all__ = ["CoverageReport", "RootCoverage", "ScopeCoverage", "compute_coverage"]


class ScopeCoverage(Model):
    """One scope's figures; null where the figure cannot be backed."""

    scope: str
    sources_present: int | None
    sources_indexed: int | None
    sources_outdated: int | None
    sources_vanished: int | None
    sources_stored: int
    chunks: int
    chunks_without_vector: int
    embedding_model: str | None
    last_indexed_at: str | None


class RootCoverage(Model):
    """A recorded root as read now: what it yields and what it skips, with reasons."""

    key: str
    kind: str
    path: str
    ref: str | None = None
    available: bool
    reason: str | None = None
    sources_present: int | None = None
    skipped: list[SkippedSource] = Field(default_factory=list)
    skipped_by_type: dict[str, int] = Field(default_factory=dict)


class CoverageReport(Model):
    """Coverage of one collection: its model, its roots, and per-scope figures."""

    collection: str
    embedder_provider: str | None
    embedder_model: str | None
    dimension: int | None
    roots: list[RootCoverage]
    scopes: list[ScopeCoverage]
    sources_without_root: int = 0
    """Stored sources indexed from code (no recorded root to compare them with)."""


def _changed(store: Store, collection: str, doc: SourceDocument, settings: ChunkSettings) -> bool:
    """True if ``doc`` is stored and its chunks now would differ in id or content."""
    states = store.chunk_states(collection, doc.source_id)
    if not states:
        return False
    now = {(c.id, c.content_hash) for c in build_chunks(doc, settings)}
    return now != {(cid, s.content_hash) for cid, s in states.items()}


def _chunk_keys(settings: ChunkSettings) -> Callable[[SourceDocument], frozenset[tuple[str, str]]]:
    def keys(doc: SourceDocument) -> frozenset[tuple[str, str]]:
        return frozenset((c.id, c.content_hash) for c in build_chunks(doc, settings))

    return keys


def _read_root(
    store: Store,
    collection: str,
    root: Mapping[str, Any],
    settings: ChunkSettings,
    walk: Callable[[Mapping[str, Any]], RootWalk] | None = None,
) -> tuple[RootCoverage, dict[str, str], set[str]]:
    """(root figures, present source id → scope, ids of present sources that changed).

    A stored source of this root that the walk skipped as unreadable now (``unread``) is
    present and outdated: indexing keeps its last good version, it has not vanished."""
    key, kind, path = root_key(root), str(root.get("kind")), str(root.get("path"))
    ref = str(root["ref"]) if root.get("ref") else None
    seen = walk(root) if walk is not None else walk_root(root, _chunk_keys(settings))
    if seen.error is not None:
        unavailable = RootCoverage(
            key=key, kind=kind, path=path, ref=ref, available=False, reason=seen.error
        )
        return unavailable, {}, set()
    present = dict(seen.scopes)
    outdated: set[str] = set()
    held: dict[str, str] = {}
    if seen.unread:
        held = {s.source_id: s.scope for s in store.list_sources(collection, root=key) if s.source_id in seen.unread}
        present.update(held)
        outdated.update(held)
    for source_id, now in seen.chunks.items():
        states = store.chunk_states(collection, source_id)
        if states and now != {(cid, s.content_hash) for cid, s in states.items()}:
            outdated.add(source_id)
    figures = RootCoverage(
        key=key,
        kind=kind,
        path=path,
        ref=ref,
        available=True,
        sources_present=len(present),
        skipped=[kept_skip(item) if item.path in held else item for item in seen.skipped],
        skipped_by_type=dict(seen.skipped_by_type),
    )
    return figures, present, outdated


def compute_coverage(
    store: Store,
    collection: str,
    roots: Sequence[Mapping[str, Any]],
    *,
    chunk_settings: ChunkSettings | None = None,
    generated: Mapping[str, Sequence[SourceDocument]] | None = None,
    walk: Callable[[Mapping[str, Any]], RootWalk] | None = None,
) -> CoverageReport:
    """Read every root again and compare with the store (see the module docstring).

    ``generated`` maps a scope the engine derives itself (``faq-card``) to the documents
    that should be indexed in it now; its stored sources are compared with those.
    ``walk`` gives what a root yields now (a cached walk, :mod:`plait.sources.walks`,
    taken with the same chunk settings); None walks each root.
    """
    settings = chunk_settings or ChunkSettings()
    info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    stored = store.list_sources(collection)
    scope_rows = {s.scope: s for s in store.scopes(collection)}
    keys = {root_key(r) for r in roots}

    root_figures: list[RootCoverage] = []
    present: dict[str, set[str]] = defaultdict(set)  # scope → source ids present
    yielded: dict[str, set[str]] = {}  # root key → source ids it yields
    outdated: set[str] = set()
    unknown: set[str] = set()  # scopes whose present figures cannot be backed
    unknown_all = False
    for root in roots:
        figures, docs, changed = _read_root(store, collection, root, settings, walk)
        root_figures.append(figures)
        if not figures.available:
            if root.get("kind") in ("jsonl", "sessions"):
                unknown.add(str(root.get("scope")))
            else:
                unknown_all = True
            continue
        yielded[figures.key] = set(docs)
        for source_id, scope in docs.items():
            present[scope].add(source_id)
        outdated |= changed
    derived = dict(generated or {})
    for scope, documents in derived.items():
        if documents:  # no documents and nothing stored: the scope is not listed
            present[scope] = {doc.source_id for doc in documents}
        outdated |= {doc.source_id for doc in documents if _changed(store, collection, doc, settings)}

    rootless = [s for s in stored if s.root not in keys and s.scope not in derived]
    unknown |= {s.scope for s in rootless}
    model = f"{info.embedder_provider}/{info.embedder_model}" if info.embedder_model else None

    scopes: list[ScopeCoverage] = []
    for scope in sorted(set(present) | set(scope_rows) | {s.scope for s in stored}):
        in_scope = [s for s in stored if s.scope == scope]
        stored_ids = {s.source_id for s in in_scope}
        row = scope_rows.get(scope)
        known = not unknown_all and scope not in unknown
        here = present.get(scope, set())
        scopes.append(
            ScopeCoverage(
                scope=scope,
                sources_present=len(here) if known else None,
                sources_indexed=len(here & stored_ids) if known else None,
                sources_outdated=len(here & stored_ids & outdated) if known else None,
                sources_vanished=(
                    sum(
                        1
                        for s in in_scope
                        if s.source_id not in (here if scope in derived else yielded.get(s.root, set()))
                    )
                    if known
                    else None
                ),
                sources_stored=len(stored_ids),
                chunks=row.chunks if row else 0,
                chunks_without_vector=row.chunks_without_vector if row else 0,
                embedding_model=model,
                last_indexed_at=row.last_indexed_at if row else None,
            )
        )
    return CoverageReport(
        collection=collection,
        embedder_provider=info.embedder_provider,
        embedder_model=info.embedder_model,
        dimension=info.dimension,
        roots=root_figures,
        scopes=scopes,
        sources_without_root=len(rootless),
    )
