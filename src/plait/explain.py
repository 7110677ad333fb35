"""Explain one document's journey through a search: "why did X (not) come back?"

For the document named by ``doc`` (metadata ``docId`` or source id), ``path`` (source
path) or ``chunk`` (chunk id), every stage in order:

1. **ingestion** — does the index hold chunks for it, how many, with vectors? If not,
   the recorded roots are read again to say whether the source was skipped (binary,
   too large, not UTF-8, outside the root, no glob matches, hidden folder) or never
   seen; nothing new is stored for that.
2. **lexical** — the query's terms against each chunk's indexed fields (the heading
   path and content, :func:`plait.fields.lexical_text`): which matched, and for each
   that did not, why (a stopword, an identifier split apart, a word only inside a
   whole identifier, a stem that changed it, not there); the BM25 score and the
   *exact* rank among every matching chunk, even past the over-fetch depth.
3. **dense** — cosine and exact rank among every chunk with a vector.
4. **fusion** — fused score and position (the same tiered fusion search runs), and
   whether the over-fetch depth, the top-k cut or the weighted threshold dropped it.
5. **rerank** (when asked) — its position before and after.

and a one-line :class:`Diagnosis` naming the stage to look at. The article's four
cases (seeds/004): dense 44 / lexical 1 / final 3 → ``fusion-worked``; dense 2 /
lexical absent → ``lexical-miss``; good in both arms, pushed out by rerank →
``rerank-demoted``; absent from both → ``not-indexed`` / ``skipped`` /
``absent-both`` (ingestion).

Nothing here re-runs the pipeline: :meth:`plait.search.SearchService.trace` runs the
search once (the same plan, arms, fusion, cut and rerank a search runs) and explain
reads ranks, scores and the returned/dropped verdict from that trace. Only for ranks
past the fetch depth does it ask the store again, for each arm's full list (hidden
chunks removed, same filters), so ranks past the over-fetch are exact.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from plait.analysis import _stem_pair, analyse, detect_language, explain_query
from plait.embeddings.base import Embedder
from plait.errors import ValidationError
from plait.explain_gate import ask_gate_stage
from plait.explain_models import (
    ArmStage,
    ChunkJourney,
    Diagnosis,
    DiagnosisCode,
    DroppedBy,
    ExplainResult,
    FusionStage,
    IngestionStage,
    LexicalStage,
    RerankStage,
    TermMatch,
    diagnose,
)
from plait.fields import lexical_text
from plait.kept_versions import kept_message, kept_versions
from plait.retrieval.pipeline import Ranked, Trace, run_arms
from plait.retrieval.request import SearchRequest
from plait.retrieval.request import validated as _validated
from plait.search import SearchService
from plait.sources.roots import root_key
from plait.sources.walks import RootWalk, walk_root
from plait.stores.base import Filters, Store
from plait.types import Chunk, FileOrigin, SearchMode, heading_path

__all__ = [
    "ArmStage",
    "ChunkJourney",
    "Diagnosis",
    "DiagnosisCode",
    "ExplainResult",
    "FusionStage",
    "IngestionStage",
    "LexicalStage",
    "RerankStage",
    "TermMatch",
    "dropped_by",
    "explain",
]

_SEPARATORS = re.compile(r"[-_.]")
_GET_BATCH = 500


# ---------------------------------------------------------------------------- target


def _all_chunks(store: Store, collection: str) -> list[Chunk]:
    ids = store.chunk_ids(collection)
    out: list[Chunk] = []
    for start in range(0, len(ids), _GET_BATCH):
        batch = ids[start : start + _GET_BATCH]
        found = store.get_chunks(collection, batch)
        out.extend(found[cid] for cid in batch if cid in found)
    return out


def _source_path(chunk: Chunk) -> str | None:
    return chunk.origin.source_path if isinstance(chunk.origin, FileOrigin) else None


MAX_PATH_CHARS = 4096
"""The longest ``path`` explain accepts (Linux's PATH_MAX)."""


def _relative(path: str, roots: Sequence[Mapping[str, Any]]) -> str:
    """The source path ``path`` names, computed as text against the recorded roots.

    A relative path is a source path as stored (``docs/guide.md``, ``./`` and inner
    ``..`` folded); an absolute one must lie, as text, inside a recorded folder/git
    root. Nothing is resolved, expanded or stat'ed on the server: a caller must not
    learn what exists there (``/proc/self/fd/6``, ``/etc/shadow`` vs ``/etc/nope``).
    """
    if len(path) > MAX_PATH_CHARS:
        raise ValidationError(
            f"path is {len(path)} characters long; a source path has at most {MAX_PATH_CHARS}"
        )
    if "\x00" in path:
        raise ValidationError("path contains a NUL character")
    if path.startswith("~"):
        raise ValidationError(
            "path starts with '~', which is not expanded: give the source path relative to "
            "the collection's roots (e.g. docs/guide.md)"
        )
    normal = posixpath.normpath(path)
    if posixpath.isabs(normal):
        for root in roots:
            base = posixpath.normpath(str(root.get("path")))
            if root.get("kind") not in ("folder", "git"):
                continue
            prefix = base.rstrip("/") + "/"
            if normal.startswith(prefix) and len(normal) > len(prefix):
                return normal[len(prefix) :]
        raise ValidationError(
            "path is absolute but not inside any of the collection's folder or git roots: "
            "give the source path relative to a root (e.g. docs/guide.md)"
        )
    if normal == ".." or normal.startswith("../") or normal == ".":
        raise ValidationError(
            "path leads outside the collection's roots: give a source path relative to a root "
            "(e.g. docs/guide.md)"
        )
    return normal


def _target_chunks(
    store: Store,
    collection: str,
    *,
    doc: str | None,
    path: str | None,
    chunk: str | None,
    roots: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, str], list[Chunk]]:
    given = [(name, value) for name, value in (("doc", doc), ("path", path), ("chunk", chunk)) if value]
    if len(given) != 1:
        raise ValidationError(
            f"name exactly one document to explain: doc, path or chunk (got {len(given)})"
        )
    kind, value = given[0]
    if kind == "chunk":
        found = store.get_chunks(collection, [value])
        return {"kind": kind, "value": value}, [found[value]] if value in found else []
    if kind == "doc":
        ids = store.chunk_ids(collection, value)
        if ids:
            found = store.get_chunks(collection, ids)
            return {"kind": kind, "value": value}, [found[c] for c in ids if c in found]
        chunks = [c for c in _all_chunks(store, collection) if str(c.metadata.get("docId")) == value]
        return {"kind": kind, "value": value}, chunks
    relative = _relative(value, roots)
    ids = store.chunk_ids(collection, relative)
    if ids:
        found = store.get_chunks(collection, ids)
        return {"kind": kind, "value": relative}, [found[c] for c in ids if c in found]
    chunks = [c for c in _all_chunks(store, collection) if _source_path(c) == relative]
    return {"kind": kind, "value": relative}, chunks


# ---------------------------------------------------------------------------- ingestion


def _why_not_yielded(root: Mapping[str, Any], relative: str, unmatched: AbstractSet[str]) -> str | None:
    """For a folder/git root: why the root would not even look at ``relative``.

    Decided from the path's text and the walk alone (no stat of ``relative``)."""
    if any(part.startswith(".") for part in Path(relative).parts[:-1]):
        return "it is in a hidden folder, which indexing ignores"
    if root.get("kind") == "folder" and relative not in unmatched:
        return None
    import fnmatch

    from plait.sources.folder import DEFAULT_GLOBS

    globs = tuple(root.get("globs") or DEFAULT_GLOBS)
    if not any(fnmatch.fnmatch(Path(relative).name, g) for g in globs):
        return f"its name matches none of the root's globs ({' '.join(globs)})"
    return None


def _ingestion_miss(
    roots: Sequence[Mapping[str, Any]],
    target: Mapping[str, str],
    walk: Callable[[Mapping[str, Any]], RootWalk] | None = None,
) -> tuple[bool, str, str | None]:
    """(skipped, what happened, root key) for a document with no chunks."""
    wanted = target["value"]
    for root in roots:
        key = root_key(root)
        seen = walk(root) if walk is not None else walk_root(root, lambda _doc: frozenset())
        if seen.error is not None:  # an unreadable root is reported
            return False, f"recorded root {key} cannot be read now: {seen.error}", key
        if wanted in seen.scopes:
            return (
                False,
                (
                    f"root {key} yields {wanted!r} now but the index holds no chunks for it: "
                    "it was added or changed after the last index — reindex"
                ),
                key,
            )
        for item in seen.skipped:
            if item.path == wanted or item.path.startswith(f"{wanted}:"):
                return True, f"{item.path} was skipped when indexing {key}: {item.reason}", key
        if target["kind"] != "chunk" and wanted in seen.uncommitted_deletions:
            return (
                False,
                f"{wanted} is not indexed from {key}: it is deleted from the working tree (git still "
                "tracks it: the deletion is not committed)",
                key,
            )
        if root.get("kind") == "git" and target["kind"] == "path" and wanted in seen.untracked:
            return True, f"{wanted} is not indexed from {key}: git does not track it (git add it, then reindex)", key
        if root.get("kind") in ("folder", "git") and target["kind"] == "path":
            reason = _why_not_yielded(root, wanted, seen.unmatched)
            if reason is not None:
                return True, f"{wanted} is not indexed from {key}: {reason}", key
    known = ", ".join(root_key(r) for r in roots) or "none"
    if target["kind"] == "path":
        said = f"no recorded root yields path {wanted!r} and the index holds no chunk of it"
    else:  # an id names what the index holds, not what a root yields
        said = f"the index holds no {'chunk' if target['kind'] == 'chunk' else 'document'} {wanted!r}"
    return False, f"{said} (recorded roots: {known})", None


# ---------------------------------------------------------------------------- terms


def _term_matches(query: str, sent_exact: set[str], chunk: Chunk) -> list[TermMatch]:
    """Each query token against the chunk's indexed fields, with a reason when it missed."""
    text = lexical_text(chunk)
    fields = analyse(text)
    exact_set, stems_set = set(fields.exact), set(fields.stems)
    language = detect_language(text)
    out: list[TermMatch] = []
    for token in explain_query(query):
        matched_exact = token.exact is not None and token.exact in sent_exact and token.exact in exact_set
        matched_stems = [s for s in token.stems if s in stems_set]
        reason = None
        if not matched_exact and not matched_stems:
            reason = _miss_reason(token.raw, token.exact, token.stems, token.stopword, exact_set, language)
        out.append(
            TermMatch(
                raw=token.raw,
                exact=token.exact,
                stems=list(token.stems),
                identifier=token.identifier,
                stopword=token.stopword,
                matched_exact=matched_exact,
                matched_stems=matched_stems,
                reason=reason,
            )
        )
    return out


def _miss_reason(
    raw: str,
    exact: str | None,
    stems: Sequence[str],
    stopword: bool,
    chunk_exact: set[str],
    language: str,
) -> str:
    if exact is None:
        return f"{raw!r} is longer than 64 characters: dropped from both fields"
    if stopword:
        where = "the chunk has it, but " if exact in chunk_exact else ""
        return f"{where}{raw!r} is a stopword: not searched (BM25 would not count it)"
    parts = [p for p in _SEPARATORS.split(exact) if p]
    if len(parts) > 1 and all(p in chunk_exact for p in parts):
        return (
            f"identifier {exact!r} is split apart in the chunk: it holds "
            f"{', '.join(repr(p) for p in parts)} but never {exact!r} whole"
        )
    holders = sorted(t for t in chunk_exact if t != exact and exact in _SEPARATORS.split(t))
    if holders:
        return (
            f"the chunk has {exact!r} only inside the identifier {holders[0]!r}, "
            "which is indexed whole"
        )
    prefix = exact[:4]
    if len(exact) >= 4 and exact.isalpha():
        similar = sorted(t for t in chunk_exact if t.isalpha() and t.startswith(prefix) and t != exact)
        if similar:
            word = similar[0]
            en, pt = _stem_pair(word)
            stem = pt if language == "portuguese" else en
            return (
                f"a stem changed it: the query's {raw!r} stems to {', '.join(stems)}, "
                f"the chunk's {word!r} to {stem!r} ({language})"
            )
    return f"{raw!r} does not occur in the chunk (heading path and content)"


# ---------------------------------------------------------------------------- the journey


def _passes(chunk: Chunk, filters: Filters) -> bool:
    if filters.scopes and chunk.scope not in filters.scopes:
        return False
    return all(chunk.metadata.get(key) == value for key, value in filters.metadata.items())


def _exact_positions(traced: Ranked, full: Ranked) -> dict[str, tuple[int, float]]:
    """Ranks in the traced arm list, continued past its depth by the store's full list."""
    out = {cid: (n, score) for n, (cid, score) in enumerate(traced, start=1)}
    n = len(out)
    for cid, score in full:
        if cid not in out:
            n += 1
            out[cid] = (n, score)
    return out


def explain(
    service: SearchService,
    collection: str,
    request: SearchRequest | Mapping[str, Any],
    *,
    doc: str | None = None,
    path: str | None = None,
    chunk: str | None = None,
    embedder: Embedder | None,
    embedder_note: str | None = None,
    roots: Sequence[Mapping[str, Any]] = (),
    walk: Callable[[Mapping[str, Any]], RootWalk] | None = None,
    also_hidden: frozenset[str] = frozenset(),
) -> ExplainResult:
    """The journey of one document for ``request`` (see the module docstring).

    The search is run once, by :meth:`SearchService.trace`, and every rank, score and
    verdict below is read from that trace; only the target's ranks past the fetch
    depth come from a second, unlimited ask of the same arms. ``walk`` gives what a
    root yields now (a cached walk, :mod:`plait.sources.walks`); None walks each time.
    ``also_hidden`` are chunk ids the caller may not see (draft FAQ cards for a reader),
    hidden in the trace exactly as in that caller's search.
    """
    store = service.store
    req = _validated(request)
    target, chunks = _target_chunks(store, collection, doc=doc, path=path, chunk=chunk, roots=roots)
    trace = service.trace(collection, req, embedder=embedder, embedder_note=embedder_note, also_hidden=also_hidden)
    plan, settings = trace.plan, trace.settings
    filters = plan.filters

    # ingestion -----------------------------------------------------------------
    states: dict[str, bool] = {}
    source_chunks: dict[str, int] = {}
    for source_id in dict.fromkeys(c.source_id for c in chunks):
        source_states = store.chunk_states(collection, source_id)
        source_chunks[source_id] = len(source_states)
        states.update({cid: s.has_vector for cid, s in source_states.items()})
    with_vector = sum(1 for c in chunks if states.get(c.id))
    if chunks:
        sources = sorted({c.source_id for c in chunks})
        ingestion = IngestionStage(
            indexed=True,
            source_ids=sources,
            chunks=len(chunks),
            chunks_with_vector=with_vector,
            kept_versions=(kept := kept_versions(store, collection, sources)),
            message=f"{len(chunks)} chunk{'' if len(chunks) == 1 else 's'} indexed, {with_vector} with a vector"
            + "".join(f"; {kept_message(source_id, record)}" for source_id, record in kept.items()),
        )
    else:
        skipped, message, key = _ingestion_miss(roots, target, walk)
        ingestion = IngestionStage(indexed=False, skipped=skipped, skip_reason=message if skipped else None,
                                   root=key, message=message)

    # the arms: the trace's lists, continued past the depth by an unlimited ask ----------
    full_lexical, full_dense = run_arms(store, collection, plan, depth=None)
    lex_pos = _exact_positions(trace.lexical, full_lexical)
    dense_pos = _exact_positions(trace.dense, full_dense) if trace.dense_ran else {}
    fused_pos = trace.fused_positions()
    rerank_ranks = trace.rerank.ranks if trace.rerank is not None else {}
    returned_ids = trace.returned

    # per chunk ---------------------------------------------------------------------------
    sent_exact = set(plan.exact)
    journeys: list[ChunkJourney] = []
    for c in chunks:
        lex = lex_pos.get(c.id)
        den = dense_pos.get(c.id)
        fz = fused_pos.get(c.id)
        journeys.append(
            ChunkJourney(
                chunk_id=c.id,
                source_id=c.source_id,
                scope=c.scope,
                ordinal=c.ordinal,
                source_chunks=source_chunks.get(c.source_id),
                heading_path=heading_path(c.origin),
                has_vector=bool(states.get(c.id)),
                passes_filters=_passes(c, filters),
                hidden=c.id in plan.hidden,
                lexical_rank=lex[0] if lex else None,
                lexical_score=lex[1] if lex else None,
                dense_rank=den[0] if den else None,
                cosine=den[1] if den else None,
                fused_rank=fz[0] if fz else None,
                fused_score=fz[1].score if fz else None,
                rerank_rank=rerank_ranks.get(c.id),
                cut_by_max_per_source=trace.diversity is not None and c.id in trace.diversity.cut,
                returned=c.id in returned_ids,
                terms=_term_matches(req.query, sent_exact, c),
            )
        )

    # each chunk's own verdict: the document's rule (dropped_by) applied to it alone
    journeys = [j.model_copy(update={"dropped_by": dropped_by(trace, [j])}) for j in journeys]

    def best(key: str) -> ChunkJourney | None:
        ranked = [j for j in journeys if getattr(j, key) is not None]
        return min(ranked, key=lambda j: getattr(j, key)) if ranked else None

    best_lex, best_dense, best_fused = best("lexical_rank"), best("dense_rank"), best("fused_rank")
    focus = best_fused or best_lex or best_dense or (journeys[0] if journeys else None)
    depth = trace.fused_depth
    shown = best_lex or focus  # the chunk the query words are held against
    lexical_stage = LexicalStage(
        ran=trace.lexical_ran,
        reason=None if trace.lexical_ran else "mode 'vector': the lexical arm does not run",
        candidates=len(lex_pos),
        overfetch=settings.overfetch,
        chunk_id=best_lex.chunk_id if best_lex else None,
        rank=best_lex.lexical_rank if best_lex else None,
        score=best_lex.lexical_score if best_lex else None,
        within_overfetch=best_lex is not None and (best_lex.lexical_rank or depth + 1) <= depth,
        exact_terms=list(plan.exact),
        stem_terms=list(plan.stems),
        terms=shown.terms if shown is not None else [],
        terms_chunk_id=shown.chunk_id if shown is not None else None,
    )
    dense_stage = ArmStage(
        ran=trace.dense_ran,
        reason=None if trace.dense_ran else plan.vector_reason,
        candidates=len(dense_pos),
        overfetch=settings.overfetch,
        chunk_id=best_dense.chunk_id if best_dense else None,
        rank=best_dense.dense_rank if best_dense else None,
        score=best_dense.cosine if best_dense else None,
        within_overfetch=best_dense is not None and (best_dense.dense_rank or depth + 1) <= depth,
    )
    fusion_stage = _fusion_stage(trace, journeys, best_fused)
    rerank_stage = _rerank_stage(trace, journeys)
    diagnosis = diagnose(
        req, settings, ingestion, journeys, lexical_stage, dense_stage, fusion_stage, rerank_stage,
        depth=depth,
    )
    if trace.dense_ran and focus is not None and not focus.has_vector:
        diagnosis = diagnosis.model_copy(
            update={
                "message": diagnosis.message + " — dense: no vector yet (the backfill has not "
                f"reached it; {int(plan.vector_coverage * 100)}% of chunks have one): it is scored "
                "as if the dense arm agreed with its lexical rank, not penalised"
            }
        )
    for source_id, record in ingestion.kept_versions.items():
        diagnosis = diagnosis.model_copy(
            update={
                "message": diagnosis.message + f" — ingestion: what is searched is the version of {source_id} "
                f"indexed {record.indexed_at} (the current file could not be read: {record.reason}; fix it "
                "and reindex)"
            }
        )
    return ExplainResult(
        query=req.query,
        collection=collection,
        target=target,
        mode=req.mode,
        ingestion=ingestion,
        lexical=lexical_stage,
        dense=dense_stage,
        fusion=fusion_stage,
        rerank=rerank_stage,
        chunks=journeys,
        diagnosis=diagnosis,
        ask_gate=ask_gate_stage(
            store, collection, req.query, chunks, journeys,
            embedder=embedder if req.mode == SearchMode.HYBRID else None,
            lexical=req.mode != SearchMode.VECTOR,
            focus=focus.chunk_id if focus is not None else None,
        ),
    )


def _rerank_stage(trace: Trace, journeys: Sequence[ChunkJourney]) -> RerankStage | None:
    rerank = trace.rerank
    if rerank is None:
        return None
    pool = {item.chunk_id for _, item in rerank.pool}
    in_pool = [j for j in journeys if j.chunk_id in pool]
    chosen = min(in_pool, key=lambda j: j.fused_rank or 0) if in_pool else None
    return RerankStage(
        method=rerank.method,
        reranked=rerank.reranked,
        reason=rerank.reason,
        k_overfetch=trace.plan.k_overfetch,
        in_pool=chosen is not None,
        chunk_id=chosen.chunk_id if chosen else None,
        rank_before=chosen.fused_rank if chosen else None,
        rank_after=(
            (rerank.ranks.get(chosen.chunk_id) or rerank.order.index(chosen.chunk_id) + 1) if chosen else None
        ),
    )


def dropped_by(trace: Trace, journeys: Sequence[ChunkJourney]) -> DroppedBy | None:
    """The stage that kept every chunk of the document out of the page (None: returned).

    In pipeline order: ``filters`` (no chunk passes the scopes/metadata), ``hidden``
    (the rest are hidden from searches that name no scope), ``overfetch`` (no chunk
    within the depth fusion read either arm to), ``threshold`` (within it, but the
    weighted fusion dropped it), ``max-per-source`` (fused, but every such chunk was left
    out because its source already had ``maxPerSource`` chunks above it), ``rerank`` (its best fused chunk was inside the page window and the reranker
    moved it out), else ``top-k`` (fused, but outside ``[offset, offset + k)``).
    """
    if any(j.returned for j in journeys) or not journeys:
        return None
    visible = [j for j in journeys if j.passes_filters]
    if not visible:
        return "filters"
    visible = [j for j in visible if not j.hidden]
    if not visible:
        return "hidden"
    fused = [j for j in visible if j.fused_rank is not None]
    if not fused:
        seen = trace.fused_depth
        in_arms = any((j.lexical_rank or seen + 1) <= seen or (j.dense_rank or seen + 1) <= seen for j in visible)
        return "threshold" if in_arms else "overfetch"
    plan = trace.plan
    kept = [j for j in fused if not j.cut_by_max_per_source]
    if not kept:
        return "max-per-source"
    if trace.rerank is not None and trace.rerank.reranked:
        pool = {item.chunk_id for _, item in trace.rerank.pool}
        numbered = trace.diversity.order if trace.diversity is not None else list(enumerate(trace.fused, start=1))
        window = {item.chunk_id for _, item in numbered[plan.offset : plan.need]}
        if any(j.chunk_id in pool and j.chunk_id in window for j in kept):
            return "rerank"
    return "top-k"


def _fusion_stage(
    trace: Trace,
    journeys: Sequence[ChunkJourney],
    best_fused: ChunkJourney | None,
) -> FusionStage:
    score = best_fused.fused_score if best_fused else None
    best_score = trace.best_score
    return FusionStage(
        settings=trace.settings,
        chunk_id=best_fused.chunk_id if best_fused else None,
        rank=best_fused.fused_rank if best_fused else None,
        score=score,
        score_normalised=(
            round(min(1.0, score / best_score), 6) if score is not None and best_score else None
        ),
        k=trace.plan.k,
        offset=trace.plan.offset,
        returned=any(j.returned for j in journeys),
        dropped_by=dropped_by(trace, journeys),
    )
