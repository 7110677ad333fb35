"""Fusion: two ranked lists in, one ranked list out. Pure functions.

Each arm hands over its candidates best-first as ``(chunk_id, score)`` pairs. The
functions here never look at a store or an interface; the search service picks one
by name from :data:`FUSERS`.

* :func:`rrf` — Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
  ``score(d) = Σ_arms w_arm / (k + rank_arm(d))``. Scores are thrown away; only
  positions count, so the incomparable scales of BM25 and cosine never meet.
* :func:`weighted` — the ADR 0080 weighted sum: ``0.6 · cosine + 0.4 · lexical_norm``
  where ``lexical_norm`` is the BM25 score divided by the best BM25 score of the
  query (so 1.0 for the top lexical hit), with hits under the threshold (0.2) dropped.

* :func:`linear` — ``minmax`` / ``dbsf``: each arm's scores normalised to 0..1 and
  summed with weights ``1 − dense_weight`` / ``dense_weight``; ``adaptive`` (the
  default) is ``minmax`` with the dense weight chosen per query by
  :func:`plait.fusion_adaptive.adaptive_weight`. :func:`for_query` records the
  query's language and whether the embedder declares it; :func:`resolve_fusion`
  fixes the weight (and the sentence saying why) once per query, on the over-fetch
  cut.

Ties are broken by the better single-arm rank, then by chunk id, so the order is
deterministic for a given index state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from plait.analysis import is_identifier, stopword_language
from plait.fusion_adaptive import (
    adaptive_weight,
    dbsf_normalise,
    language_coverage,
    linear_scores,
    minmax_normalise,
)
from plait.types import FusionMethod, FusionSettings

__all__ = [
    "FUSERS",
    "Fused",
    "arm_weights",
    "fetch_depth",
    "for_query",
    "linear",
    "max_fused_score",
    "resolve_fusion",
    "rrf",
    "tiered",
    "tiers",
    "weighted",
]

Ranked = Sequence[tuple[str, float]]


class Fused(NamedTuple):
    """One fused candidate: its fused score and where each arm put it.

    A named tuple (immutable, built several times faster than a frozen dataclass: a
    search fuses some hundred candidates)."""

    chunk_id: str
    score: float
    lexical_rank: int | None
    dense_rank: int | None
    lexical_score: float | None
    dense_score: float | None


def arm_weights(lexical_weight: float) -> tuple[float, float]:
    """``lexical_weight`` in 0..1 → (lexical, dense) multipliers; 0.5 → (1.0, 1.0)."""
    return 2.0 * lexical_weight, 2.0 * (1.0 - lexical_weight)


def _positions(ranked: Ranked) -> dict[str, tuple[int, float]]:
    positions: dict[str, tuple[int, float]] = {}
    for rank, (chunk_id, score) in enumerate(ranked, start=1):
        positions.setdefault(chunk_id, (rank, score))
    return positions


_NO_RANK = 1 << 62  # "not in this arm": worse than any real rank


def _assemble(
    scores: dict[str, float],
    lexical: dict[str, tuple[int, float]],
    dense: dict[str, tuple[int, float]],
) -> list[Fused]:
    # Order: score descending, then the better of the two arm ranks, then chunk id (the
    # tuples compare on these three alone: chunk ids are unique).
    keyed = []
    for chunk_id, score in scores.items():
        lex = lexical.get(chunk_id)
        den = dense.get(chunk_id)
        best = min(lex[0] if lex else _NO_RANK, den[0] if den else _NO_RANK)
        keyed.append((-score, best, chunk_id, lex, den))
    keyed.sort()
    return [
        Fused(
            chunk_id,
            -negative,
            lex[0] if lex else None,
            den[0] if den else None,
            lex[1] if lex else None,
            den[1] if den else None,
        )
        for negative, _, chunk_id, lex, den in keyed
    ]


def rrf(
    lexical: Ranked,
    dense: Ranked,
    *,
    k: int = 60,
    lexical_weight: float = 0.5,
) -> list[Fused]:
    """Reciprocal Rank Fusion of the two arms.

    >>> [round(f.score, 6) for f in rrf([("a", 9.0)], [("b", 0.9), ("a", 0.8)])]
    [0.032522, 0.016393]
    """
    w_lex, w_dense = arm_weights(lexical_weight)
    lex_pos, dense_pos = _positions(lexical), _positions(dense)
    scores: dict[str, float] = {}
    for positions, weight in ((lex_pos, w_lex), (dense_pos, w_dense)):
        for chunk_id, (rank, _) in positions.items():
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (k + rank)
    return _assemble(scores, lex_pos, dense_pos)


def weighted(
    lexical: Ranked,
    dense: Ranked,
    *,
    vector_weight: float = 0.6,
    lexical_weight: float = 0.4,
    threshold: float = 0.2,
) -> list[Fused]:
    """ADR 0080's weighted sum of cosine and max-normalised BM25, with a threshold.

    A chunk missing from an arm contributes 0 from that arm (its *reported* score
    stays None). Negative cosines count as 0.
    """
    lex_pos, dense_pos = _positions(lexical), _positions(dense)
    best = max((s for _, s in lex_pos.values()), default=0.0)
    scores: dict[str, float] = {}
    for chunk_id in {**lex_pos, **dense_pos}:
        lex = lex_pos.get(chunk_id)
        den = dense_pos.get(chunk_id)
        lex_norm = (lex[1] / best) if (lex and best > 0) else 0.0
        cosine = max(0.0, den[1]) if den else 0.0
        total = vector_weight * cosine + lexical_weight * lex_norm
        if total >= threshold:
            scores[chunk_id] = total
    return _assemble(scores, lex_pos, dense_pos)


_NORMALISERS = {"minmax": minmax_normalise, "dbsf": dbsf_normalise}


def linear(lexical: Ranked, dense: Ranked, *, dense_weight: float = 0.5, norm: str = "minmax") -> list[Fused]:
    """Each arm's scores normalised (``minmax`` or ``dbsf``), summed with weights
    ``1 − dense_weight`` and ``dense_weight`` (see :mod:`plait.fusion_adaptive`).

    >>> [(f.chunk_id, round(f.score, 3)) for f in linear([("a", 4.0), ("b", 2.0)], [("b", 0.9), ("c", 0.5)])]
    [('a', 0.5), ('b', 0.5), ('c', 0.0)]
    """
    normalise = _NORMALISERS[norm]
    lex_pos, dense_pos = _positions(lexical), _positions(dense)
    scores = linear_scores(normalise(lexical), normalise(dense), dense_weight=dense_weight)
    return _assemble(scores, lex_pos, dense_pos)


def for_query(settings: FusionSettings, query: str, languages: frozenset[str] | None) -> FusionSettings:
    """``settings`` with ``query_language`` (by the query's stopwords) and
    ``embedder_covers_query`` (is it among the embedder's declared ``languages``) set.

    >>> s = for_query(FusionSettings(), "what causes the flu", frozenset({"en"}))
    >>> s.query_language, s.embedder_covers_query
    ('en', True)
    """
    language = stopword_language(query)
    return settings.model_copy(
        update={
            "query_language": language,
            "embedder_covers_query": language_coverage(language, languages),
            "query_has_identifier": any(is_identifier(token) for token in query.split()),
        }
    )


def _covers(settings: FusionSettings) -> bool | None:
    """What the adaptive rule is told about the embedder and the query's language: None
    only when the language of a query without identifiers is undetermined (``python
    string to dict``). An embedder that declares no languages, an identifier query of
    undetermined language (``BRCA1 TP53``), or the language prior off count as not
    covering it: disagreeing arms then lower the dense weight, as before."""
    if not settings.language_prior:
        return False
    if settings.embedder_covers_query is None and (
        settings.query_language is not None or settings.query_has_identifier is not False
    ):
        return False
    return settings.embedder_covers_query


def resolve_fusion(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> FusionSettings:
    """``settings`` with ``dense_weight_used`` and ``fusion_reason`` filled in for one query.

    Call it with the arms cut at the over-fetch depth (tier 0): the weight is then fixed
    for every deeper tier, so pages stay consistent. RRF and weighted are unchanged.
    """
    if settings.method in (FusionMethod.RRF, FusionMethod.WEIGHTED) or settings.dense_weight_used is not None:
        return settings
    cut_l, cut_d = lexical[: settings.overfetch], dense[: settings.overfetch]
    if settings.method == FusionMethod.ADAPTIVE:
        base = settings.estimated_base if settings.estimated_base is not None else settings.dense_weight
        decision = adaptive_weight(
            cut_l,
            cut_d,
            base=base,
            covers_query=_covers(settings),
            query_language=settings.query_language,
        )
        used, reason = decision.dense_weight, decision.reason
        if not settings.language_prior and cut_l and cut_d and not decision.agree:
            reason += " (language prior off)"
        if settings.estimated_base is not None and cut_l and cut_d:
            reason = f"{settings.estimate_reason or 'collection estimate'}; {reason}"
    elif not cut_d:
        used, reason = 0.0, "dense arm returned nothing: lexical only"
    else:
        used = settings.dense_weight
        reason = f"{settings.method.value}: fixed dense weight {used:g} (lexical {1 - used:g})"
    return settings.model_copy(update={"dense_weight_used": used, "fusion_reason": reason})


def _linear_from(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> list[Fused]:
    resolved = resolve_fusion(settings, lexical, dense)
    norm = "dbsf" if settings.method == FusionMethod.DBSF else "minmax"
    weight = resolved.dense_weight_used if resolved.dense_weight_used is not None else settings.dense_weight
    return linear(lexical, dense, dense_weight=weight, norm=norm)


def _rrf_from(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> list[Fused]:
    return rrf(lexical, dense, k=settings.rrf_k, lexical_weight=settings.lexical_weight)


def _weighted_from(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> list[Fused]:
    return weighted(
        lexical,
        dense,
        vector_weight=settings.vector_weight,
        lexical_weight=settings.lexical_score_weight,
        threshold=settings.threshold,
    )


FUSERS: dict[FusionMethod, Callable[[FusionSettings, Ranked, Ranked], list[Fused]]] = {
    FusionMethod.RRF: _rrf_from,
    FusionMethod.WEIGHTED: _weighted_from,
    FusionMethod.MINMAX: _linear_from,
    FusionMethod.DBSF: _linear_from,
    FusionMethod.ADAPTIVE: _linear_from,
}


def max_fused_score(settings: FusionSettings, *, lexical: bool = True, dense: bool = True) -> float | None:
    """The highest fused score ``settings`` allow over the arms that ran; None if 0.

    RRF: ``w_lex / (k + 1) + w_dense / (k + 1)`` (rank 1 in every arm that ran).
    Weighted: ``vector_weight + lexical_score_weight`` (cosine 1, the best BM25 score).
    minmax / dbsf / adaptive: the weights of the arms that ran (normalised scores ≤ 1),
    with the dense weight actually used (``dense_weight_used``) when resolved.

    >>> round(max_fused_score(FusionSettings(method=FusionMethod.RRF)), 6)  # 1/61 + 1/61
    0.032787
    >>> max_fused_score(FusionSettings(), dense=False)  # adaptive, dense weight 0.4 unresolved
    0.6
    """
    if settings.method == FusionMethod.RRF:
        w_lex, w_dense = arm_weights(settings.lexical_weight)
        top = (w_lex if lexical else 0.0) + (w_dense if dense else 0.0)
        best = top / (settings.rrf_k + 1)
    elif settings.method in (FusionMethod.MINMAX, FusionMethod.DBSF, FusionMethod.ADAPTIVE):
        w = settings.dense_weight_used if settings.dense_weight_used is not None else settings.dense_weight
        best = ((1.0 - w) if lexical else 0.0) + (w if dense else 0.0)
    else:
        best = (settings.lexical_score_weight if lexical else 0.0) + (
            settings.vector_weight if dense else 0.0
        )
    return best if best > 0 else None


def fetch_depth(overfetch: int, need: int) -> int:
    """The arm depth :func:`tiered` needs for ``need`` positions: ``overfetch`` doubled
    until it reaches ``need``."""
    depth = overfetch
    while depth < need:
        depth *= 2
    return depth


def tiered(
    fuser: Callable[[FusionSettings, Ranked, Ranked], list[Fused]],
    settings: FusionSettings,
    lexical: Ranked,
    dense: Ranked,
    *,
    need: int,
) -> list[Fused]:
    """A fused order that pages consistently past the over-fetch depth.

    Tier 0 is the fusion of both arms cut at ``settings.overfetch`` — exactly what a
    search without an offset returns. When ``need`` positions are wanted and tier 0
    has fewer, tier 1 fuses the arms cut at twice the depth and appends the chunks not
    ranked yet, in its order; and so on, doubling. Earlier positions never move when a
    deeper page is asked for, so for one query and index state page 2 never repeats or
    skips a hit of page 1 (re-fusing at a single deeper cut would: a chunk at rank 55
    of one arm lifts chunks past others). ``lexical`` and ``dense`` must each hold at
    least :func:`fetch_depth` ``(overfetch, need)`` candidates when the arm has them.
    """
    return tiers(fuser, settings, lexical, dense, need=need)[0]


def tiers(
    fuser: Callable[[FusionSettings, Ranked, Ranked], list[Fused]],
    settings: FusionSettings,
    lexical: Ranked,
    dense: Ranked,
    *,
    need: int,
) -> tuple[list[Fused], int]:
    """:func:`tiered`'s order and the depth of its last tier (how deep fusion read each arm)."""
    order: list[Fused] = []
    seen: set[str] = set()
    depth = settings.overfetch
    while True:
        for item in fuser(settings, lexical[:depth], dense[:depth]):
            if item.chunk_id not in seen:
                seen.add(item.chunk_id)
                order.append(item)
        if len(order) >= need or (depth >= len(lexical) and depth >= len(dense)):
            return order, depth
        depth *= 2
