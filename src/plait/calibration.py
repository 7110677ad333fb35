"""Label-free calibration of the fusion weights on pseudo-queries drawn from the collection.

A user who indexes a corpus has no relevance judgements, but the corpus can judge
itself: a sentence cut from a chunk, with part of its words masked, is a query whose
answer is known — the chunk it came from. :func:`calibrate`

1. samples ``samples`` chunks (seeded, from the sorted ids of the chunks a search that
   names no scope can return, :func:`searchable_chunks`: the same index state gives the
   same sample);
2. makes one pseudo-query per chunk (:func:`pseudo_query`: a sentence of 6–40 words,
   each word kept with probability ``keep``, seeded);
3. asks each arm through the search pipeline's own stage
   (:func:`plait.retrieval.pipeline.run_arms` on a :class:`~plait.retrieval.plan.QueryPlan`)
   and measures how well it returns the source chunk (MRR@10: 1 / rank, 0 past rank 10)
   and the chunk's *source* (MRR@10 over the distinct sources of the arm's first
   ``SOURCE_DEPTH`` chunks: the unit results are cited and judged by, used by the arm
   estimate, :mod:`plait.arm_estimate`);
4. sets the dense weight from the two arms' chunk MRR (:func:`weight_from_mrr`).

Pseudo-queries copy the chunk's own words, so the lexical arm always looks better on
them than on real questions; the *ratio* between the arms is what carries over: an
embedder that cannot place the collection's language (an English model over Portuguese
text) finds its own chunk's sentence far less often than BM25 does.

The calibration reads only the store (chunks, both indexes) and the embedder — never a
dataset, a qrels file or any judgement.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from plait.collection_settings import read_settings, write_settings
from plait.embeddings.base import Embedder
from plait.errors import ConfigError, NotFoundError
from plait.retrieval.diversity import doc_ranking
from plait.retrieval.pipeline import run_arms
from plait.retrieval.plan import hidden_chunks, plan_for_text
from plait.staleness import searchable_count
from plait.stores.base import Store
from plait.types import FusionSettings, Model, to_json

__all__ = [
    "CALIBRATION_SEED",
    "Calibration",
    "calibrate",
    "estimate_arms",
    "pseudo_query",
    "searchable_chunks",
    "source_mrr",
    "weight_from_mrr",
]

CALIBRATION_SEED = 13
#: chunks asked of each arm per pseudo-query: enough for ten distinct sources in practice
SOURCE_DEPTH = 30
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


class Calibration(Model):
    """What a calibration measured and the dense weight it chose (saved in the collection)."""

    samples: int
    keep: float
    seed: int
    lexical_mrr: float
    dense_mrr: float
    #: the same pseudo-queries judged by their chunk's source (any chunk of it counts)
    lexical_source_mrr: float
    dense_source_mrr: float
    dense_weight: float
    reason: str
    #: why the collection's searches do not use ``dense_weight`` (its saved fusion method
    #: takes none), None when they do; set by ``Plait.calibrate``, not saved
    not_used: str | None = None


def pseudo_query(content: str, rng: random.Random, *, keep: float = 0.5) -> str | None:
    """One masked sentence of ``content``: a sentence of 6–40 words (else the first 30
    words), each word kept with probability ``keep``; None for a chunk under 4 words.

    >>> pseudo_query("Short. The quick brown fox jumps over the lazy dog.", random.Random(1), keep=1.0)
    'The quick brown fox jumps over the lazy dog.'
    """
    sentences = [s for s in _SENTENCE_RE.split(content) if 6 <= len(s.split()) <= 40]
    if not sentences:
        words = content.split()[:30]
        if len(words) < 4:
            return None
        sentences = [" ".join(words)]
    sentence = rng.choice(sentences)
    words = sentence.split()
    kept = [w for w in words if rng.random() < keep]
    return " ".join(kept) if len(kept) >= 2 else sentence


def weight_from_mrr(lexical_mrr: float, dense_mrr: float) -> float:
    """The dense weight for arms that found their own chunk with these MRRs.

    ``0.5 · dense / lexical`` clamped to 0.1..0.5: equal arms get the even split
    (0.5), a dense arm at half the lexical MRR gets 0.25, one far behind is muted to
    0.1. Never above 0.5, because pseudo-queries cannot show the dense arm *beating*
    BM25 on real questions (they copy the chunk's words).

    >>> weight_from_mrr(0.9, 0.9), weight_from_mrr(0.9, 0.45), weight_from_mrr(0.8, 0.1)
    (0.5, 0.25, 0.1)
    """
    if lexical_mrr <= 0:
        return 0.5
    ratio = min(1.0, dense_mrr / lexical_mrr)
    return round(min(0.5, max(0.1, 0.5 * ratio)), 4)


def searchable_chunks(store: Store, collection: str) -> tuple[list[str], frozenset[str]]:
    """The sorted ids of the chunks of ``collection`` an ordinary search can return, and
    the ids it hides (:func:`plait.retrieval.plan.hidden_chunks`: FAQ cards' ``searchHidden``).

    What calibrations sample from and search with: a hidden chunk is never a question and
    never a candidate. The ids left are hashes of the source id and the chunk's place in
    it (:func:`plait.chunk_build.chunk_id`), the same for every build of one corpus; card
    chunk ids hash ``card:<uuid4>``, so sorted among them they moved from build to build.
    """
    hidden = hidden_chunks(read_settings(store, collection), None)
    return sorted(set(store.chunk_ids(collection)) - hidden), hidden


def _mrr(ranked: Sequence[tuple[str, float]], target: str) -> float:
    for rank, (chunk_id, _) in enumerate(ranked[:10], start=1):
        if chunk_id == target:
            return 1.0 / rank
    return 0.0


def source_mrr(ranked: Sequence[tuple[str, float]], source_of: Mapping[str, str], target: str) -> float:
    """1 / the rank of source ``target`` among the distinct sources of ``ranked`` (in
    order of their first chunk), 0 past the tenth source or when absent.

    >>> source_mrr([("a1", 0.9), ("a2", 0.8), ("b1", 0.7)], {"a1": "a", "a2": "a", "b1": "b"}, "b")
    0.5
    """
    sources = doc_ranking([chunk_id for chunk_id, _ in ranked], source_of, 10)
    return 1.0 / (sources.index(target) + 1) if target in sources else 0.0


def calibrate(
    store: Store,
    collection: str,
    embedder: Embedder,
    *,
    samples: int = 200,
    keep: float = 0.5,
    seed: int = CALIBRATION_SEED,
) -> Calibration:
    """Measure both arms on pseudo-queries of ``collection`` and choose the dense weight.

    Deterministic for a given index state (sorted ids of the searchable chunks, seeded
    sample and masks, exact search). Raises :class:`~plait.errors.ConfigError` when there is nothing to
    calibrate on (no chunks, no vectors).
    """
    if not 1 <= samples <= 10_000:
        raise ConfigError(f"samples must be between 1 and 10000, got {samples}")
    if not 0.0 < keep <= 1.0:
        raise ConfigError(f"keep must be in (0, 1], got {keep}")
    info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    if info.chunks == 0 or info.chunks - info.chunks_without_vector == 0:
        raise ConfigError(
            f"collection {collection!r} has {info.chunks} chunks and "
            f"{info.chunks - info.chunks_without_vector} vectors: calibration needs both arms"
        )
    ids, hidden = searchable_chunks(store, collection)
    rng = random.Random(seed)
    sample = sorted(rng.sample(ids, min(samples, len(ids))))
    chunks = store.get_chunks(collection, sample)
    source_of = {chunk_id: chunk.source_id for chunk_id, chunk in chunks.items()}
    totals = [0.0, 0.0, 0.0, 0.0]  # lexical, dense by chunk; lexical, dense by source
    used = 0
    for chunk_id in sample:
        chunk = chunks.get(chunk_id)
        text = pseudo_query(chunk.content, rng, keep=keep) if chunk is not None else None
        if chunk is None or text is None:
            continue
        plan = plan_for_text(text, FusionSettings(), vector=embedder.embed_query(text), hidden=hidden)
        lexical, dense = run_arms(store, collection, plan, depth=SOURCE_DEPTH)
        unknown = sorted({cid for cid, _ in (*lexical, *dense)} - source_of.keys())
        source_of.update({cid: found.source_id for cid, found in store.get_chunks(collection, unknown).items()})
        totals[0] += _mrr(lexical, chunk_id)
        totals[1] += _mrr(dense, chunk_id)
        totals[2] += source_mrr(lexical, source_of, chunk.source_id)
        totals[3] += source_mrr(dense, source_of, chunk.source_id)
        used += 1
    if used == 0:
        raise ConfigError(f"collection {collection!r} has no chunk long enough for a pseudo-query")
    lexical_mrr, dense_mrr, lexical_source, dense_source = (round(total / used, 4) for total in totals)
    weight = weight_from_mrr(lexical_mrr, dense_mrr)
    reason = (
        f"{used} pseudo-queries (a sentence of a sampled chunk, {keep:.0%} of its words kept): "
        f"the source chunk's MRR@10 lexical {lexical_mrr:.3f}, dense {dense_mrr:.3f} "
        f"→ dense weight {weight:g} (0.5·dense/lexical, within 0.1..0.5)"
    )
    return Calibration(
        samples=used,
        keep=keep,
        seed=seed,
        lexical_mrr=lexical_mrr,
        dense_mrr=dense_mrr,
        lexical_source_mrr=lexical_source,
        dense_source_mrr=dense_source,
        dense_weight=weight,
        reason=reason,
    )


def estimate_arms(
    store: Store,
    collection: str,
    embedder: Embedder,
    *,
    changes_at: int | None = None,
    measured: Calibration | None = None,
) -> dict[str, Any] | None:
    """Measure the collection's arm estimate (:mod:`plait.arm_estimate`), save it under
    ``armEstimate`` (with ``changesAt``, the collection's ``chunkChanges`` counter then:
    :mod:`plait.staleness`) and return it; None (and any old estimate removed) when the
    collection has fewer than ``MIN_CHUNKS`` chunks or lacks vectors. ``measured``: a
    calibration of ``SAMPLES`` pseudo-queries just made, used instead of measuring again."""
    from plait.arm_estimate import MIN_CHUNKS, SAMPLES, estimate_record

    info = store.get_collection(collection)
    if info is None:
        return None
    if info.chunks < MIN_CHUNKS or info.chunks_without_vector > 0:
        if read_settings(store, collection).arm_estimate is not None:
            write_settings(store, collection, arm_estimate=None)
        return None
    if measured is None or measured.samples != SAMPLES:
        measured = calibrate(store, collection, embedder, samples=SAMPLES)
    settings = read_settings(store, collection)
    record = estimate_record(to_json(measured), searchable_count(info.chunks, settings))
    record["changesAt"] = settings.chunk_changes if changes_at is None else changes_at
    write_settings(store, collection, arm_estimate=record)
    return record
