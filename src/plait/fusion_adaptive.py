"""Score-normalised and adaptive fusion. Pure functions over two ranked lists.

* :func:`minmax` — each arm's scores mapped to 0..1 by the list's own min and max,
  then ``(1 - w) · lexical + w · dense`` with ``w`` the dense weight. A chunk missing
  from an arm gets 0 from it.
* :func:`dbsf` — distribution-based score fusion: each arm's scores mapped by the
  list's ``mean ± 3σ`` to 0..1 (clipped), then the same weighted sum.
* :func:`adaptive_weight` — the dense weight for *one query*, from what the two lists
  say about themselves and what the embedder declares about itself (no labels).
  First, do the arms *agree* at the top — is either arm's first hit within the
  other's first ``AGREE_DEPTH`` (5)? If not, one of them is wrong and nothing in the
  lists says which. When the embedder declares languages and not the query's (see
  :func:`language_coverage`: an English model over Portuguese disagrees with BM25 on
  most queries), BM25 is the safer bet and the dense weight drops to ``min(base,
  DISAGREE_WEIGHT)`` (0.3). When it declares the query's language, or the language is
  undetermined (a short query without stopwords: ``python string to dict``), the
  disagreement is not held against either arm — holding it against the dense arm cost
  CoSQA's 119 of 500 such queries (``benchmarks/results/fusion_modes.md``). In every other case each arm's *confidence* is the gap
  between its first and second score over the spread of its top
  ``CONFIDENCE_DEPTH`` (10) scores (a clear winner → near 1, a flat list → near 0),
  and the dense weight moves from ``base`` by ``ADAPT_STEP · (conf_dense −
  conf_lexical)``, clamped to ``[ADAPT_MIN, ADAPT_MAX]``. An empty arm gets weight 0.

The confidence formula and constants are the ones measured in
``benchmarks/results/fusion_modes.md``; the language rule was checked on held-out
queries in ``benchmarks/results/fusion_grid.md``. Everything is deterministic for a
given pair of lists, query and embedder, so a search is deterministic for a given
index state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ADAPT_MAX",
    "ADAPT_MIN",
    "ADAPT_STEP",
    "AGREE_DEPTH",
    "CONFIDENCE_DEPTH",
    "DISAGREE_WEIGHT",
    "WeightDecision",
    "adaptive_weight",
    "agree",
    "confidence",
    "dbsf_normalise",
    "language_coverage",
    "linear_scores",
    "minmax_normalise",
]

Ranked = Sequence[tuple[str, float]]

CONFIDENCE_DEPTH = 10
AGREE_DEPTH = 5
DISAGREE_WEIGHT = 0.3
ADAPT_STEP = 0.5
ADAPT_MIN = 0.1
ADAPT_MAX = 0.9


def minmax_normalise(ranked: Ranked) -> dict[str, float]:
    """``(s − min) / (max − min)`` per chunk (first occurrence); all 1.0 when max == min.

    >>> minmax_normalise([("a", 4.0), ("b", 3.0), ("c", 2.0)])
    {'a': 1.0, 'b': 0.5, 'c': 0.0}
    """
    scores: dict[str, float] = {}
    for chunk_id, score in ranked:
        scores.setdefault(chunk_id, score)
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {c: (s - low) / (high - low) for c, s in scores.items()}


def dbsf_normalise(ranked: Ranked) -> dict[str, float]:
    """``(s − (μ − 3σ)) / 6σ`` clipped to 0..1 (population σ); all 1.0 when σ == 0.

    >>> {c: round(v, 4) for c, v in dbsf_normalise([("a", 3.0), ("b", 1.0)]).items()}
    {'a': 0.6667, 'b': 0.3333}
    """
    scores: dict[str, float] = {}
    for chunk_id, score in ranked:
        scores.setdefault(chunk_id, score)
    if not scores:
        return {}
    values = list(scores.values())
    mean = sum(values) / len(values)
    sigma = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if sigma <= 0:
        return dict.fromkeys(scores, 1.0)
    low = mean - 3 * sigma
    return {c: min(1.0, max(0.0, (s - low) / (6 * sigma))) for c, s in scores.items()}


def linear_scores(
    lexical_norm: dict[str, float], dense_norm: dict[str, float], *, dense_weight: float
) -> dict[str, float]:
    """``(1 − w) · lexical + w · dense`` per chunk in either arm (missing → 0)."""
    return {
        c: (1.0 - dense_weight) * lexical_norm.get(c, 0.0) + dense_weight * dense_norm.get(c, 0.0)
        for c in {**lexical_norm, **dense_norm}
    }


def confidence(ranked: Ranked, *, depth: int = CONFIDENCE_DEPTH) -> float:
    """How clearly an arm's first hit beats the rest: ``(s1 − s2) / (s1 − s_depth)``.

    ``s_depth`` is the last score within the first ``depth``. 0.0 for fewer than two
    hits or a flat list.

    >>> confidence([("a", 10.0), ("b", 6.0), ("c", 5.0), ("d", 2.0)])
    0.5
    """
    scores = [s for _, s in ranked[:depth]]
    if len(scores) < 2 or scores[0] <= scores[-1]:
        return 0.0
    return (scores[0] - scores[1]) / (scores[0] - scores[-1])


def agree(lexical: Ranked, dense: Ranked, *, depth: int = AGREE_DEPTH) -> bool:
    """True if either arm's first hit is within the other's first ``depth``.

    >>> agree([("a", 3.0), ("b", 2.0)], [("c", 0.9), ("a", 0.8)]), agree([("a", 1.0)], [("c", 0.9)], depth=5)
    (True, False)
    """
    if not lexical or not dense:
        return False
    return lexical[0][0] in {c for c, _ in dense[:depth]} or dense[0][0] in {c for c, _ in lexical[:depth]}


def language_coverage(query_language: str | None, languages: frozenset[str] | None) -> bool | None:
    """Does the embedder cover the query's language? None when either is unknown.

    >>> language_coverage("pt", frozenset({"en"})), language_coverage("en", frozenset({"en"}))
    (False, True)
    >>> language_coverage(None, frozenset({"en"})) is None, language_coverage("pt", None) is None
    (True, True)
    """
    if query_language is None or languages is None:
        return None
    return query_language in languages


@dataclass(frozen=True, slots=True)
class WeightDecision:
    """The dense weight one query used, the signals behind it, and a sentence saying why."""

    dense_weight: float
    lexical_confidence: float
    dense_confidence: float
    agree: bool
    reason: str


def adaptive_weight(
    lexical: Ranked,
    dense: Ranked,
    *,
    base: float = 0.4,
    step: float = ADAPT_STEP,
    low: float = ADAPT_MIN,
    high: float = ADAPT_MAX,
    disagree_weight: float = DISAGREE_WEIGHT,
    covers_query: bool | None = None,
    query_language: str | None = None,
) -> WeightDecision:
    """The dense weight for one query (see the module docstring).

    ``covers_query`` is :func:`language_coverage` for this query (None: unknown) and
    ``query_language`` the language it was decided for (only used in the reason).

    >>> adaptive_weight([("a", 10.0), ("b", 6.0), ("c", 2.0)], [("a", 0.9), ("b", 0.85), ("c", 0.7)]).dense_weight
    0.275
    >>> adaptive_weight([("a", 10.0), ("b", 6.0)], [("z", 0.9), ("y", 0.85)], covers_query=False).dense_weight
    0.3
    >>> adaptive_weight([("a", 10.0), ("b", 6.0)], [("z", 0.9), ("y", 0.85)]).dense_weight
    0.4
    >>> adaptive_weight([("a", 10.0), ("b", 6.0)], [("z", 0.9), ("y", 0.85)], covers_query=True).dense_weight
    0.4
    """
    if not dense:
        return WeightDecision(0.0, confidence(lexical), 0.0, False, "dense arm returned nothing: lexical only")
    if not lexical:
        return WeightDecision(1.0, 0.0, confidence(dense), False, "lexical arm returned nothing: dense only")
    conf_l, conf_d = round(confidence(lexical), 6), round(confidence(dense), 6)
    agreed = agree(lexical, dense)
    language = f" ({query_language})" if query_language else ""
    if not agreed and covers_query is False:
        weight = round(min(base, disagree_weight), 6)
        why = f"the embedder does not declare the query's language{language}"
        reason = (
            f"arms disagree (neither top hit is in the other's top {AGREE_DEPTH}) and {why}: "
            f"lexical-leaning dense weight {weight:g} (min of base {base:g} and {disagree_weight:g})"
        )
        return WeightDecision(weight, conf_l, conf_d, False, reason)
    weight = round(min(high, max(low, base + step * (conf_d - conf_l))), 6)
    if agreed:
        head = "arms agree at the top"
    elif covers_query:
        head = f"arms disagree at the top, but the embedder declares the query's language{language}"
    else:
        head = "arms disagree at the top; the query's language is undetermined (not held against either arm)"
    reason = (
        f"{head}; top-1 gap over top-{CONFIDENCE_DEPTH} spread: lexical {conf_l:.3f}, "
        f"dense {conf_d:.3f} → dense weight {weight:g} "
        f"(base {base:g} + {step:g}·(dense − lexical), within {low:g}..{high:g})"
    )
    return WeightDecision(weight, conf_l, conf_d, agreed, reason)
