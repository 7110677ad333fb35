"""Ask's relevance gate, calibrated on the collection itself (no labels).

A fixed cosine says nothing across corpora: e5 scores a Terraform README 0.85 against a
question about etcd keys, and another corpus' answering passage 0.80. So the gate is
measured on each collection, by the first ``ask`` after it was indexed or changed
(:func:`ensure_gate`, :func:`calibrate_gate`):

1. **inside**: ``samples`` pseudo-questions, each a masked sentence of a sampled chunk
   (:func:`plait.calibration.pseudo_query`) — questions the collection answers;
2. **outside**: as many texts the collection cannot answer, in its own vocabulary:
   each joins single words drawn from different sampled chunks (:func:`shuffled_text`),
   so it shares words with many chunks and is about none of them;
3. both sets go through the search pipeline's arms
   (:func:`plait.retrieval.pipeline.run_arms`), and each text keeps its **best cosine**
   (top of the dense arm) and its **best term coverage** (the largest share of its
   content words one lexical candidate holds);
4. the cosine gate is the ``OUTSIDE_QUANTILE`` quantile of the outside cosines plus
   ``MARGIN`` of the way up to the inside median (:func:`threshold`): a cosine that
   shuffled words of the collection reach is no evidence; the term-coverage gate the
   same over the outside coverages, never under ``MIN_COVERAGE``.

The constants were chosen on one repository (``manage-get-gov``: the 0.95 quantile
refuses 38 of its 40 out-of-corpus questions and keeps all 20 identifier questions;
1.0 refuses all 5 unanswerable ones but loses 3 more answerable) and reported on the
others (``benchmarks/ask_answers.py``, ``benchmarks/results/ask_answers.md``). The result is stored with the collection (setting
``askGate``); a setting ``ask.minCosine`` / ``ask.minTermCoverage`` or a per-call value
overrides it. A hit passes the gate when its cosine reaches the cosine gate, or the
lexical arm found it and it holds the term-coverage share of the question's content words
(:func:`verdict` says which, with the figures).
"""

from __future__ import annotations

import hashlib
import logging
import random
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from plait.calibration import pseudo_query
from plait.chunk_build import index_text
from plait.collection_settings import CollectionSettings, read_settings, write_settings
from plait.embeddings.base import Embedder
from plait.errors import ConfigError, NotFoundError, PlaitError
from plait.refinery.extract import content_stems, text_stems
from plait.retrieval.pipeline import run_arms
from plait.retrieval.plan import plan_for_text
from plait.stores.base import Store
from plait.types import Chunk, FileOrigin, FusionSettings, Hit, Model

logger = logging.getLogger(__name__)

__all__ = [
    "GATE_KEY",
    "GATE_SEED",
    "Gate",
    "GateCalibration",
    "GateVerdict",
    "calibrate_gate",
    "ensure_gate",
    "fingerprint",
    "judge",
    "resolve_gate",
    "shuffled_text",
    "term_coverage",
    "threshold",
    "verdict",
]

#: The collection setting the calibration is stored under.
GATE_KEY = "askGate"
GATE_SEED = 29
#: Which quantile of the outside (shuffled) scores the gate starts from.
OUTSIDE_QUANTILE = 0.95
#: How far from that quantile towards the inside median the gate sits (0..1).
MARGIN = 0.0
#: The term-coverage gate is never below this share of the question's content words.
MIN_COVERAGE = 0.5
#: Fallbacks when nothing is calibrated (no vectors, or a collection too small).
DEFAULT_MIN_COSINE = 0.84
DEFAULT_MIN_COVERAGE = 0.5
_LEXICAL_DEPTH = 10


class GateCalibration(Model):
    """What :func:`calibrate_gate` measured and the gate it chose (setting ``askGate``).

    ``inside_cosine`` / ``outside_cosine`` (and ``*_coverage``) are the best scores of
    each pseudo-question / shuffled text, sorted; ``min_cosine`` is None when the
    collection had no vectors to measure.
    """

    min_cosine: float | None
    min_term_coverage: float
    samples: int
    chunks: int
    seed: int
    embedder: str | None
    inside_cosine: list[float]
    outside_cosine: list[float]
    inside_coverage: list[float]
    outside_coverage: list[float]
    calibrated_at: str
    fingerprint: str | None = None


Source = Literal["calibrated", "setting", "request", "default"]


class Gate(Model):
    """The gate one ask used, and where each value came from.

    ``source``: ``calibrated`` (the collection's :class:`GateCalibration`), ``setting``
    (the collection's ``ask`` setting), ``request`` (the call) or ``default`` (nothing
    calibrated yet).
    """

    min_cosine: float
    min_term_coverage: float
    cosine_source: Source
    coverage_source: Source


class GateVerdict(Model):
    """Why one hit passed or failed the gate, with the figures compared."""

    chunk_id: str
    passed: bool
    cosine: float | None
    term_coverage: float | None
    reason: str


def threshold(inside: Sequence[float], outside: Sequence[float], *, floor: float = 0.0) -> float | None:
    """The gate between two score samples: the ``OUTSIDE_QUANTILE`` quantile of
    ``outside`` moved ``MARGIN`` of the way to the median of ``inside`` (when above it),
    never under ``floor``; None without outside scores.

    >>> threshold([0.9, 0.92, 0.94], [0.7, 0.72, 0.74, 0.76, 0.8])
    0.8
    """
    if not outside:
        return None
    ordered = sorted(outside)
    position = min(len(ordered) - 1, max(0, round(OUTSIDE_QUANTILE * (len(ordered) - 1))))
    gate = ordered[position]
    if inside:
        middle = statistics.median(inside)
        if middle > gate:
            gate += MARGIN * (middle - gate)
    return round(max(floor, gate), 4)


def shuffled_text(words: Sequence[Sequence[str]], rng: random.Random, *, length: int = 8) -> str | None:
    """``length`` words, each from a different chunk's word list: the collection's
    vocabulary about nothing in it; None with fewer than ``length`` non-empty lists.

    >>> shuffled_text([["a"], ["b"], ["c"]], random.Random(1), length=2) in {"a b", "a c", "b a", "b c", "c a", "c b"}
    True
    """
    pools = [w for w in words if w]
    if len(pools) < length:
        return None
    return " ".join(rng.choice(pool) for pool in rng.sample(pools, length))


def _indexed(chunk: Chunk) -> str:
    heading = chunk.origin.heading_path if isinstance(chunk.origin, FileOrigin) else []
    return index_text(chunk.content, heading)


def _coverage(question: str, text: str) -> float:
    wanted = content_stems(question)
    if not wanted:
        return 0.0
    return len(wanted & text_stems(text)) / len(wanted)


def _best(
    store: Store, collection: str, text: str, embedder: Embedder | None, texts: dict[str, str]
) -> tuple[float | None, float]:
    vector = embedder.embed_query(text) if embedder is not None else None
    plan = plan_for_text(text, FusionSettings(), vector=vector)
    lexical, dense = run_arms(store, collection, plan, depth=_LEXICAL_DEPTH)
    missing = [cid for cid, _ in lexical if cid not in texts]
    if missing:
        texts.update({cid: _indexed(c) for cid, c in store.get_chunks(collection, missing).items()})
    coverage = max((_coverage(text, texts[cid]) for cid, _ in lexical if cid in texts), default=0.0)
    cosine = round(float(dense[0][1]), 4) if dense else None
    return cosine, round(coverage, 4)


def calibrate_gate(
    store: Store,
    collection: str,
    embedder: Embedder | None,
    *,
    samples: int = 24,
    seed: int = GATE_SEED,
) -> GateCalibration:
    """Measure ``samples`` pseudo-questions and as many shuffled texts (module docstring).

    Deterministic for an index state (sorted ids, seeded sample). Raises
    :class:`~plait.errors.ConfigError` for a collection with no chunk long enough.
    """
    if not 4 <= samples <= 1000:
        raise ConfigError(f"samples must be between 4 and 1000, got {samples}")
    info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    has_vectors = embedder is not None and info.chunks > info.chunks_without_vector
    dense = embedder if has_vectors else None
    ids = sorted(store.chunk_ids(collection))
    rng = random.Random(seed)
    sample = sorted(rng.sample(ids, min(samples, len(ids))))
    chunks = store.get_chunks(collection, sample)
    texts: dict[str, str] = {}
    inside: list[tuple[float | None, float]] = []
    words: list[list[str]] = []
    for chunk_id in sample:
        chunk = chunks.get(chunk_id)
        if chunk is None:
            continue
        words.append(sorted({w for w in chunk.content.split() if w.isalpha() and len(w) > 3}))
        question = pseudo_query(chunk.content, rng)
        if question is not None:
            inside.append(_best(store, collection, question, dense, texts))
    outside: list[tuple[float | None, float]] = []
    for _ in range(len(inside)):
        text = shuffled_text(words, rng, length=min(8, max(2, len(words) // 2)))
        if text is not None:
            outside.append(_best(store, collection, text, dense, texts))
    if not inside:
        raise ConfigError(f"collection {collection!r} has no chunk long enough for a pseudo-question")
    in_cos = sorted(c for c, _ in inside if c is not None)
    out_cos = sorted(c for c, _ in outside if c is not None)
    in_cov = sorted(v for _, v in inside)
    out_cov = sorted(v for _, v in outside)
    coverage = threshold(in_cov, out_cov, floor=MIN_COVERAGE)
    return GateCalibration(
        min_cosine=threshold(in_cos, out_cos) if dense is not None else None,
        min_term_coverage=min(1.0, coverage if coverage is not None else DEFAULT_MIN_COVERAGE),
        samples=len(inside),
        chunks=info.chunks,
        seed=seed,
        embedder=f"{embedder.provider}/{embedder.model}" if dense is not None and embedder is not None else None,
        inside_cosine=in_cos,
        outside_cosine=out_cos,
        inside_coverage=in_cov,
        outside_coverage=out_cov,
        calibrated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def resolve_gate(
    saved_settings: CollectionSettings, *, min_cosine: float | None = None, min_term_coverage: float | None = None
) -> Gate:
    """The gate for one ask: the call's values, else the collection's ``ask`` setting
    (``minCosine``, ``minTermCoverage``), else its calibration (``askGate``), else the
    uncalibrated defaults."""
    ask = saved_settings.ask
    raw = saved_settings.ask_gate
    calibration = GateCalibration.model_validate(raw) if raw else None

    def pick(asked: float | None, setting: Any, calibrated: float | None, default: float) -> tuple[float, Source]:
        if asked is not None:
            return asked, "request"
        if setting is not None:
            return float(setting), "setting"
        if calibrated is not None:
            return calibrated, "calibrated"
        return default, "default"

    cosine, cosine_source = pick(
        min_cosine, ask.get("minCosine"), calibration.min_cosine if calibration else None, DEFAULT_MIN_COSINE
    )
    coverage, coverage_source = pick(
        min_term_coverage,
        ask.get("minTermCoverage"),
        calibration.min_term_coverage if calibration else None,
        DEFAULT_MIN_COVERAGE,
    )
    return Gate(
        min_cosine=cosine, min_term_coverage=coverage, cosine_source=cosine_source, coverage_source=coverage_source
    )


def term_coverage(text: str, question_stems: frozenset[str]) -> float:
    """The share of the question's content words ``text`` holds."""
    if not question_stems:
        return 0.0
    return round(len(question_stems & text_stems(text)) / len(question_stems), 4)


def judge(
    chunk_id: str,
    *,
    cosine: float | None,
    lexical_hit: bool,
    text: str,
    question_stems: frozenset[str],
    gate: Gate,
) -> GateVerdict:
    """Whether a chunk passes ``gate``, and why (its figures against the gate values).

    ``text`` is the chunk as indexed (heading path included); the term coverage counts
    only when the lexical arm found the chunk."""
    cosine = None if cosine is None else round(cosine, 4)
    coverage = term_coverage(text, question_stems) if lexical_hit and question_stems else None
    cos_text = "no vector" if cosine is None else f"cosine {cosine:.4f}"
    cos_ok = cosine is not None and cosine >= gate.min_cosine
    cov_ok = coverage is not None and coverage >= gate.min_term_coverage
    cov_text = "not a lexical hit" if coverage is None else f"term coverage {coverage:.2f}"
    if cos_ok:
        reason = f"passed: {cos_text} ≥ {gate.min_cosine:.4f} ({gate.cosine_source})"
    elif cov_ok:
        reason = f"passed: {cov_text} ≥ {gate.min_term_coverage:.2f} ({gate.coverage_source})"
    else:
        cos_part = cos_text if cosine is None else f"{cos_text} < {gate.min_cosine:.4f}"
        cov_part = cov_text if coverage is None else f"{cov_text} < {gate.min_term_coverage:.2f}"
        reason = f"failed: {cos_part}; {cov_part}"
    return GateVerdict(
        chunk_id=chunk_id, passed=cos_ok or cov_ok, cosine=cosine, term_coverage=coverage, reason=reason
    )


def verdict(hit: Hit, question_stems: frozenset[str], gate: Gate, *, lexical_ran: bool = True) -> GateVerdict:
    """:func:`judge` for a search hit (``lexical_ran`` False: every hit's terms count)."""
    heading = hit.origin.heading_path if isinstance(hit.origin, FileOrigin) else []
    return judge(
        hit.chunk_id,
        cosine=hit.vector_score,
        lexical_hit=hit.ranks.lexical is not None or not lexical_ran,
        text=index_text(hit.content, heading),
        question_stems=question_stems,
        gate=gate,
    )


def fingerprint(store: Store, collection: str) -> str | None:
    """What the collection holds, in a few characters: its chunk ids (content-derived)
    and how many lack a vector. A change of either means a new calibration."""
    info = store.get_collection(collection)
    if info is None or info.chunks == 0:
        return None
    digest = hashlib.blake2b(digest_size=8)
    for chunk_id in sorted(store.chunk_ids(collection)):
        digest.update(chunk_id.encode("utf-8"))
    return f"{info.chunks}-{info.chunks_without_vector}-{digest.hexdigest()}"


def ensure_gate(
    store: Store, collection: str, embedder: Embedder | None, *, samples: int = 32
) -> GateCalibration | None:
    """The collection's calibration, measured again (and stored, setting ``askGate``) when
    the collection changed since the stored one (:func:`fingerprint`) or none is stored.

    Ask calls this, so the first question after an index, reindex or backfill that changed
    the collection recalibrates it; an unchanged collection reuses the stored result. The
    dense half is measured only on a fully embedded collection (vectors pending: the
    lexical half alone, the cosine gate left to the default until the backfill ends). A
    calibration that cannot run (too small a collection, the embedder failing) is logged
    and leaves the stored one in place.
    """
    current = fingerprint(store, collection)
    if current is None:
        return None
    saved = read_settings(store, collection).ask_gate
    if saved and saved.get("fingerprint") == current:
        return GateCalibration.model_validate(saved)
    info = store.get_collection(collection)
    complete = embedder is not None and info is not None and info.chunks_without_vector == 0
    try:
        result = calibrate_gate(store, collection, embedder if complete else None, samples=samples)
    except PlaitError as exc:
        logger.warning("ask gate of %r not calibrated: %s", collection, exc)
        return None
    result = result.model_copy(update={"fingerprint": current})
    write_settings(store, collection, ask_gate=result.model_dump(mode="json", by_alias=True))
    logger.info(
        "ask gate of %r: cosine %s, term coverage %.2f (%d samples)",
        collection, result.min_cosine, result.min_term_coverage, result.samples,
    )
    return result
