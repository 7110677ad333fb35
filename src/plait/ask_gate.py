"""Ask's relevance gate, calibrated on the collection itself (no labels).

A fixed cosine says nothing across corpora: e5 scores a Terraform README 0.85 against a
question about etcd keys, and another corpus' answering passage 0.80. So the gate is
measured on each collection, at the end of the index, reindex or backfill run that left
every chunk with a vector and changed more than a tenth of the chunks measured last
time, at a full reindex and by ``plait calibrate`` (:func:`plait.ask_gate_state.ensure_gate`, called by the
service's post-index hook; staleness in :mod:`plait.staleness`; an ask or explain
finding no calibration, or a stale one, measures it then):

1. **inside**: ``samples`` pseudo-questions, each a masked sentence of a sampled chunk
   (:func:`plait.calibration.pseudo_query`) — questions the collection answers;
2. **outside**: as many texts the collection cannot answer, in its own vocabulary:
   each joins single words drawn from different sampled chunks (:func:`shuffled_text`),
   so it shares words with many chunks and is about none of them;
3. both sets go through the search pipeline's arms
   (:func:`plait.retrieval.pipeline.run_arms`), and each text keeps its **best cosine**
   (top of the dense arm) and its **best term coverage** (the largest share of its
   content words one lexical candidate holds);
4. the cosine gate is the ``OUTSIDE_QUANTILE`` (0.95) quantile of the outside cosines
   (:func:`threshold`): a cosine that shuffled words of the collection reach is no
   evidence; the term-coverage gate is the ``COVERAGE_QUANTILE`` (0.5) quantile of the
   outside coverages, never under ``MIN_COVERAGE`` (half the question's content words).

Why these two quantiles (``benchmarks/ask_answers.py``, diagnosis in
``benchmarks/results/ask_answers.md``): on the realrepo sets, questions in natural words
(paraphrases, no identifier) and the unanswerable or out-of-corpus questions (another
government service's docs) are not separated by any retrieval signal measured: AUC of
the best cosine 0.49 / 0.59, of its gap to the second hit 0.50 / 0.46, of the two arms'
agreement 0.55 / 0.53, of the best sentence's cosine 0.64 / 0.58 (all-MiniLM-L6-v2's
0.68 / 0.66); the best is the term coverage (0.70 / 0.67; IDF-weighted 0.74 / 0.71).
Question-shaped text scores *lower* cosines than the shuffled texts (a natural
question's best 0.81–0.875, shuffled text 0.84–0.89), so the cosine gate passes what
copies the collection's wording and nothing else; it stays as the high-precision path
(cross-language questions, short passages). The coverage gate decides natural questions:
at the outside 0.95 quantile (0.6–0.625) it refused 19 of 20; at the median (0.5 on
every collection measured, where the floor binds too) 7 / 5 of 20 are answered with a
correct citation. Of the 13 / 15 missed, 5 / 6 never had a relevant hit in the top 5,
the gate refused 6 / 8 holding one and passed an irrelevant hit over it in 2 / 1; none
was lost by the answer citing the wrong one of the sources the gate passed. A lower
floor buys little (the offline sweep): at 0.45 / 0.4 / 0.35 a relevant hit passes for
0.7 / 0.7 / 0.725 of manage-get-gov's 40 while its out-of-corpus refusals fall 0.9 /
0.725 / 0.65. Telling these questions apart takes a reader (a cross-encoder or NLI
model), and no registry package ships one. Words no chunk holds count twice (a cheap
IDF: a question naming what the collection never mentions is about something else); it
refuses the etcd question, whose other half the kms-key README holds. The constants were
chosen on ``manage-get-gov`` and FaQuAD's dev queries; ``teaching-vacancies`` and
FaQuAD's test sample are reported as held out.

The result is stored with the collection (setting ``askGate``, with when and by what it
was measured: ``calibratedAt``, ``calibratedBy`` ``index`` or ``ask``); a setting
``ask.minCosine`` / ``ask.minTermCoverage`` or a per-call value overrides it. A hit
passes the gate when its cosine reaches the cosine gate, or the lexical arm found it and
it holds the term-coverage share of the question's content words (:func:`verdict` says
which, with the figures).
"""

from __future__ import annotations

import logging
import random
import statistics
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from plait.analysis import analyse_query, explain_query
from plait.calibration import pseudo_query, searchable_chunks
from plait.chunk_build import index_text
from plait.collection_settings import CollectionSettings
from plait.embeddings.base import Embedder
from plait.errors import ConfigError, NotFoundError
from plait.refinery.extract import content_stems, text_stems
from plait.retrieval.pipeline import run_arms
from plait.retrieval.plan import lexical_terms, plan_for_text
from plait.staleness import changed_share
from plait.stores.base import Store
from plait.types import Chunk, FusionSettings, Hit, Model, heading_path

logger = logging.getLogger(__name__)

__all__ = [
    "GATE_KEY",
    "GATE_SEED",
    "GATE_VERSION",
    "Gate",
    "GateCalibration",
    "GateVerdict",
    "calibrate_gate",
    "calibration_note",
    "judge",
    "question_identifiers",
    "resolve_gate",
    "shuffled_text",
    "term_coverage",
    "threshold",
    "unknown_terms",
    "verdict",
]

#: The collection setting the calibration is stored under.
GATE_KEY = "askGate"
GATE_SEED = 29
#: The calibration method's version: a stored calibration of another version (the one
#: before coverage quantiles and index-time calibration is 1) is measured again.
GATE_VERSION = 2
#: Which quantile of the outside (shuffled) cosines the cosine gate is.
OUTSIDE_QUANTILE = 0.95
#: Which quantile of the outside term coverages the coverage gate is.
COVERAGE_QUANTILE = 0.5
#: How far from that quantile towards the inside median the gate sits (0..1).
MARGIN = 0.0
#: The term-coverage gate is never below this share of the question's content words.
MIN_COVERAGE = 0.5
#: Fallbacks when nothing is calibrated (no vectors, or a collection too small).
DEFAULT_MIN_COSINE = 0.84
DEFAULT_MIN_COVERAGE = 0.5
_LEXICAL_DEPTH = 10


Source = Literal["calibrated", "setting", "request", "default"]
#: What measured a calibration: the end of an index run, an ask/explain that found none
#: (or a stale one), or ``plait calibrate``.
Trigger = Literal["index", "ask", "calibrate"]


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
    calibrated_by: Trigger | None = None
    version: int = 1
    changes_at: int | None = None
    """The collection's ``chunkChanges`` counter when this was measured
    (:mod:`plait.staleness`; None: measured before the counter existed)."""



class Gate(Model):
    """The gate one ask used, and where each value came from.

    ``source``: ``calibrated`` (the collection's :class:`GateCalibration`), ``setting``
    (the collection's ``ask`` setting), ``request`` (the call) or ``default`` (nothing
    calibrated yet); ``calibrated_at`` / ``calibrated_by``: when and by what the stored
    calibration was measured, even when an override replaced its values.
    """

    min_cosine: float
    min_term_coverage: float
    cosine_source: Source
    coverage_source: Source
    calibrated_at: str | None = None
    """When the collection's calibration was measured (None: never calibrated)."""
    calibrated_by: Trigger | None = None
    """``index`` (the end of an index run that changed the collection), ``ask`` or ``calibrate``."""
    changed_since: float | None = None
    """The share of the calibration's chunks added, updated or deleted since it was measured
    (:func:`plait.staleness.changed_share`; None: never calibrated). Over 0.1 it is measured
    again by the next index run, ask or explain."""
    unknown_terms: list[str] = Field(default_factory=list)
    """The question's content words (stems) no chunk of the collection holds: each counts
    twice in the question's total for the term coverage (:func:`term_coverage`)."""


class GateVerdict(Model):
    """Why one hit passed or failed the gate, with the figures compared."""

    chunk_id: str
    passed: bool
    cosine: float | None
    term_coverage: float | None
    reason: str


def threshold(
    inside: Sequence[float], outside: Sequence[float], *, floor: float = 0.0, quantile: float | None = None
) -> float | None:
    """The gate between two score samples: the ``quantile`` (default
    ``OUTSIDE_QUANTILE``) quantile of ``outside`` (the value at index
    ``round(quantile · (n - 1))`` of the sorted sample) moved ``MARGIN`` of the way to the
    median of ``inside`` (when above it), never under ``floor``; None without outside scores.

    >>> threshold([0.9, 0.92, 0.94], [0.7, 0.72, 0.74, 0.76, 0.8])
    0.8
    >>> threshold([1.0], [0.25, 0.4, 0.5, 0.6, 0.7], quantile=0.5), threshold([1.0], [0.2, 0.3, 0.4], floor=0.5, quantile=0.5)
    (0.5, 0.5)
    """
    if not outside:
        return None
    share = OUTSIDE_QUANTILE if quantile is None else quantile
    ordered = sorted(outside)
    position = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
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
    return index_text(chunk.content, heading_path(chunk.origin))


def _coverage(question: str, text: str) -> float:
    wanted = content_stems(question)
    if not wanted:
        return 0.0
    return len(wanted & text_stems(text)) / len(wanted)


def _best(
    store: Store,
    collection: str,
    text: str,
    embedder: Embedder | None,
    texts: dict[str, str],
    hidden: frozenset[str],
) -> tuple[float | None, float]:
    vector = embedder.embed_query(text) if embedder is not None else None
    plan = plan_for_text(text, FusionSettings(), vector=vector, hidden=hidden)
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

    Deterministic for an index state (sorted ids of the chunks a search can return,
    :func:`~plait.calibration.searchable_chunks`; seeded sample). Raises
    :class:`~plait.errors.ConfigError` for a collection with no chunk long enough.
    """
    if not 4 <= samples <= 1000:
        raise ConfigError(f"samples must be between 4 and 1000, got {samples}")
    info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    has_vectors = embedder is not None and info.chunks > info.chunks_without_vector
    dense = embedder if has_vectors else None
    ids, hidden = searchable_chunks(store, collection)
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
            inside.append(_best(store, collection, question, dense, texts, hidden))
    outside: list[tuple[float | None, float]] = []
    for _ in range(len(inside)):
        text = shuffled_text(words, rng, length=min(8, max(2, len(words) // 2)))
        if text is not None:
            outside.append(_best(store, collection, text, dense, texts, hidden))
    if not inside:
        raise ConfigError(f"collection {collection!r} has no chunk long enough for a pseudo-question")
    in_cos = sorted(c for c, _ in inside if c is not None)
    out_cos = sorted(c for c, _ in outside if c is not None)
    in_cov = sorted(v for _, v in inside)
    out_cov = sorted(v for _, v in outside)
    coverage = threshold(in_cov, out_cov, floor=MIN_COVERAGE, quantile=COVERAGE_QUANTILE)
    return GateCalibration(
        min_cosine=threshold(in_cos, out_cos) if dense is not None else None,
        min_term_coverage=min(1.0, coverage if coverage is not None else DEFAULT_MIN_COVERAGE),
        samples=len(inside),
        chunks=max(0, info.chunks - len(hidden)),  # searchable ones: plait.staleness.searchable_count
        seed=seed,
        embedder=f"{embedder.provider}/{embedder.model}" if dense is not None and embedder is not None else None,
        inside_cosine=in_cos,
        outside_cosine=out_cos,
        inside_coverage=in_cov,
        outside_coverage=out_cov,
        calibrated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def resolve_gate(
    saved_settings: CollectionSettings,
    *,
    min_cosine: float | None = None,
    min_term_coverage: float | None = None,
    chunks: int | None = None,
) -> Gate:
    """The gate for one ask: the call's values, else the collection's ``ask`` setting
    (``minCosine``, ``minTermCoverage``), else its calibration (``askGate``), else the
    uncalibrated defaults. ``chunks``, the collection's chunk count now, makes
    ``changed_since`` the share the staleness decision uses (chunks deleted outside an
    index run, a rejected FAQ card, count too)."""
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
        min_cosine=cosine,
        min_term_coverage=coverage,
        cosine_source=cosine_source,
        coverage_source=coverage_source,
        calibrated_at=calibration.calibrated_at if calibration else None,
        calibrated_by=calibration.calibrated_by if calibration else None,
        changed_since=(
            changed_share(saved_settings.chunk_changes, calibration.changes_at, calibration.chunks, now=chunks)
            if calibration
            else None
        ),
    )


def calibration_note(gate: Gate) -> str:
    """", calibrated … by …" for a one-line display of ``gate`` ("" when never calibrated).

    >>> calibration_note(Gate(min_cosine=0.9, min_term_coverage=0.5, cosine_source="calibrated",
    ...     coverage_source="calibrated", calibrated_at="2026-12-01T16:00:00Z", calibrated_by="index"))
    '; calibrated 2026-12-01T16:00:00Z at the end of an index run'
    >>> calibration_note(Gate(min_cosine=0.9, min_term_coverage=0.5, cosine_source="calibrated",
    ...     coverage_source="calibrated", calibrated_at="2026-12-01T16:00:00Z", calibrated_by="calibrate",
    ...     changed_since=0.034))
    '; calibrated 2026-12-01T16:00:00Z by plait calibrate, 3.4% of its chunks changed since'
    """
    if gate.calibrated_at is None:
        return ""
    by = {
        "index": "at the end of an index run",
        "calibrate": "by plait calibrate",
    }.get(gate.calibrated_by or "", "by the first ask after a change")
    since = f", {gate.changed_since:.1%} of its chunks changed since" if gate.changed_since else ""
    return f"; calibrated {gate.calibrated_at} {by}{since}"


def term_coverage(text: str, question_stems: frozenset[str], unknown: Collection[str] = ()) -> float:
    """The share of the question's content words ``text`` holds, the ``unknown`` ones
    (words the collection never uses) counting twice in the total: a question naming
    what the collection never mentions is about something else, whatever it shares.

    >>> term_coverage("Name of the KMS key ring of the Kubernetes cluster", content_stems("rotate the etcd key of the Kubernetes cluster"), {"etcd", "rotat"})
    0.4286
    """
    if not question_stems:
        return 0.0
    extra = len(question_stems & frozenset(unknown))
    return round(len(question_stems & text_stems(text)) / (len(question_stems) + extra), 4)


def unknown_terms(store: Store, collection: str, question: str, question_stems: frozenset[str]) -> list[str]:
    """The stems of ``question_stems`` whose word no chunk of ``collection`` holds in any
    form, sorted: its exact token, its English stem and its Portuguese stem are all absent
    (one lexical lookup per content word, one candidate deep). Every form counts because a
    question without stopwords is stemmed as English, while a Portuguese collection holds
    Portuguese stems: "prazo devolução reembolso" names words the collection has."""
    unknown: set[str] = set()
    for token in explain_query(question):
        if token.stopword:
            continue
        mine = question_stems & {*token.stems, *([token.exact] if token.exact else [])}
        if not mine or mine <= unknown:
            continue
        exact = [token.exact] if token.exact else []
        if not store.lexical_search(collection, exact, list(token.stems), limit=1):
            unknown |= mine
    return sorted(unknown)


def judge(
    chunk_id: str,
    *,
    cosine: float | None,
    lexical_hit: bool,
    text: str,
    question_stems: frozenset[str],
    gate: Gate,
    identifiers: frozenset[str] = frozenset(),
) -> GateVerdict:
    """Whether a chunk passes ``gate``, and why (its figures against the gate values).

    ``text`` is the chunk as indexed (heading path included); the term coverage counts
    only when the lexical arm found the chunk, the gate's ``unknown_terms`` twice; the
    cosine only when the dense arm returned it (``cosine`` None: "no cosine", whether
    or not the chunk has a vector). A
    lexical hit holding every identifier the question names (:func:`question_identifiers`;
    as a whole token) passes too: a name like ``ERR-4012`` found verbatim is the answer's address, whatever
    the words around it ("what does … mean?")."""
    cosine = None if cosine is None else round(cosine, 4)
    unknown = question_stems & frozenset(gate.unknown_terms)
    coverage = term_coverage(text, question_stems, unknown) if lexical_hit and question_stems else None
    cos_text = "no cosine (not a dense hit)" if cosine is None else f"cosine {cosine:.4f}"
    cos_ok = cosine is not None and cosine >= gate.min_cosine
    cov_ok = coverage is not None and coverage >= gate.min_term_coverage
    held = f"{len(question_stems & text_stems(text))} of {len(question_stems)} words"
    if unknown:
        held += f", {len(unknown)} never in the collection counted twice"
    cov_text = "not a lexical hit" if coverage is None else f"term coverage {coverage:.2f} ({held})"
    named = bool(identifiers) and lexical_hit and identifiers <= frozenset(analyse_query(text).exact)
    if cos_ok:
        reason = f"passed: {cos_text} ≥ {gate.min_cosine:.4f} ({gate.cosine_source})"
    elif cov_ok:
        reason = f"passed: {cov_text} ≥ {gate.min_term_coverage:.2f} ({gate.coverage_source})"
    elif named:
        reason = f"passed: holds every identifier the question names ({', '.join(sorted(identifiers))})"
    else:
        cos_part = cos_text if cosine is None else f"{cos_text} < {gate.min_cosine:.4f}"
        cov_part = cov_text if coverage is None else f"{cov_text} < {gate.min_term_coverage:.2f}"
        reason = f"failed: {cos_part}; {cov_part}"
    return GateVerdict(
        chunk_id=chunk_id, passed=cos_ok or named or cov_ok, cosine=cosine, term_coverage=coverage, reason=reason
    )


def verdict(
    hit: Hit,
    question_stems: frozenset[str],
    gate: Gate,
    *,
    lexical_ran: bool = True,
    identifiers: frozenset[str] = frozenset(),
) -> GateVerdict:
    """:func:`judge` for a search hit (``lexical_ran`` False: every hit's terms count)."""
    return judge(
        hit.chunk_id,
        cosine=hit.vector_score,
        lexical_hit=hit.ranks.lexical is not None or not lexical_ran,
        text=index_text(hit.content, heading_path(hit.origin)),
        question_stems=question_stems,
        gate=gate,
        identifiers=identifiers,
    )


def question_identifiers(question: str) -> frozenset[str]:
    """The identifiers ``question`` names: its exact terms (lowercased) holding letters and
    digits (``ERR-4012``, ``v3.11``) or an underscore (``node_pool_size``). Plain numbers
    and hyphenated or quoted words ("real-time", "don't") are not names: they occur in any
    text.

    >>> sorted(question_identifiers("Don't we log ERR-4012 in real-time for node_pool_size, 2 times?"))
    ['err-4012', 'node_pool_size']
    """
    exact, _ = lexical_terms(question)
    return frozenset(
        term
        for term in exact
        if "_" in term or (any(ch.isdigit() for ch in term) and any(ch.isalpha() for ch in term))
    )
