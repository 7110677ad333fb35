"""The fusion tuner: search fusion settings and measure the gain on held-out queries.

The judged queries are shuffled (fixed seed) and dealt into ``folds`` folds. For each
fold, the candidate with the best mean ``measure`` on the *other* folds is chosen and
scored on this fold only, so every reported figure comes from queries the choice never
saw. The held-out score is the mean over all queries of the score each got under the
settings chosen without it; the gain is that minus the defaults' score on the same
queries. The settings finally proposed (and saved with ``--save``) are the best on
all queries; their all-query score is selection-biased and is not reported as a gain.

Ties go to the earlier candidate, and the defaults come first, so a tuner that finds
nothing better keeps the defaults. Each arm is asked once per query (at the deepest
over-fetch of the grid); every candidate is fused from those lists and ordered exactly as
the search service orders them (:meth:`~plait.evaluation.runner.Arms.ranked`: the
identifier precedence included), and scored by ir-measures.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plait.errors import ConfigError
from plait.evaluation.metrics import MEASURES, per_query, run_from_rankings
from plait.evaluation.models import FoldResult, TuneReport
from plait.evaluation.runner import Arms, doc_ranking
from plait.types import FusionMethod, FusionSettings

__all__ = [
    "CrossValidation",
    "candidate_grid",
    "cross_validate",
    "fusion_to_save",
    "score_candidates",
    "split_folds",
    "tune",
]

RRF_K = (10, 30, 60, 100)
LEXICAL_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
OVERFETCH = (20, 50, 100, 200)
#: (vector_weight, lexical_score_weight) pairs for the weighted sum.
WEIGHTED_PAIRS = ((0.8, 0.2), (0.7, 0.3), (0.6, 0.4), (0.5, 0.5), (0.4, 0.6), (0.3, 0.7))
THRESHOLDS = (0.0, 0.2)


#: What the tuner chooses; with the knobs the collection had saved, what ``--save`` writes.
_TUNED = frozenset(
    {"method", "rrf_k", "lexical_weight", "overfetch", "vector_weight", "lexical_score_weight", "threshold"}
)
#: Filled in when settings are read (the collection's arm estimate) or per query: never saved.
_DERIVED = frozenset(
    {
        "estimated_base", "estimate_reason", "dense_weight_used", "fusion_reason", "lexical_weight_reason",
        "query_has_identifier", "query_language", "embedder_covers_query", "identifier_reason",
    }
)


def fusion_to_save(chosen: FusionSettings, saved: Mapping[str, Any]) -> dict[str, Any]:
    """The collection's fusion settings (camelCase) with ``chosen`` in them: the tuned knobs
    and those ``saved`` already named, at ``chosen``'s values. Never the arm estimate the
    defaults were read with, nor a per-query decision: saved, they would freeze the estimate
    (a later one would not be read) and a built-in ``denseWeight`` would replace it."""
    named = FusionSettings.model_validate(dict(saved)).model_fields_set - _DERIVED
    return chosen.model_dump(mode="json", by_alias=True, include=set(named | _TUNED))


def candidate_grid(defaults: FusionSettings | None = None) -> list[FusionSettings]:
    """The settings searched, ``defaults`` first (RRF: k × lexical_weight × over-fetch;
    weighted: weight pair × threshold × over-fetch)."""
    base = defaults or FusionSettings()
    grid = [base]
    for k in RRF_K:
        for weight in LEXICAL_WEIGHTS:
            for overfetch in OVERFETCH:
                grid.append(
                    base.model_copy(
                        update={"method": FusionMethod.RRF, "rrf_k": k, "lexical_weight": weight, "overfetch": overfetch}
                    )
                )
    for vector_weight, lexical_weight in WEIGHTED_PAIRS:
        for threshold in THRESHOLDS:
            for overfetch in OVERFETCH:
                grid.append(
                    base.model_copy(
                        update={
                            "method": FusionMethod.WEIGHTED,
                            "vector_weight": vector_weight,
                            "lexical_score_weight": lexical_weight,
                            "threshold": threshold,
                            "overfetch": overfetch,
                        }
                    )
                )
    unique: dict[str, FusionSettings] = {}
    for item in grid:
        unique.setdefault(item.model_dump_json(), item)
    return list(unique.values())


def split_folds(query_ids: Sequence[str], folds: int, *, seed: int = 0) -> list[list[str]]:
    """Shuffle ``query_ids`` with ``seed`` and deal them into ``folds`` disjoint folds."""
    if folds < 2:
        raise ConfigError(f"cross-validation needs at least 2 folds, got {folds}")
    if len(query_ids) < folds:
        raise ConfigError(f"{len(query_ids)} queries cannot be split into {folds} folds")
    order = list(dict.fromkeys(query_ids))
    random.Random(seed).shuffle(order)
    return [order[i::folds] for i in range(folds)]


def _mean(values: Mapping[str, float], ids: Sequence[str]) -> float:
    return sum(values[q] for q in ids) / len(ids) if ids else 0.0


@dataclass(frozen=True)
class CrossValidation:
    """Per fold: the candidate index chosen on the other folds, its and the defaults'
    mean on the fold; ``held_out`` is each query's score under the choice made without it."""

    chosen: list[int]
    chosen_scores: list[float]
    default_scores: list[float]
    held_out: dict[str, float]


def cross_validate(
    table: Sequence[Mapping[str, float]], folds: Sequence[Sequence[str]], *, default: int = 0
) -> CrossValidation:
    """Choose on the training folds, score on the held-out fold.

    ``table[c][q]`` is candidate ``c``'s score on query ``q``. For held-out fold ``i``
    the choice looks only at queries outside fold ``i``.
    """
    if not table:
        raise ConfigError("no candidate settings to cross-validate")
    chosen, chosen_scores, default_scores = [], [], []
    held_out: dict[str, float] = {}
    for i, test in enumerate(folds):
        train = [q for j, fold in enumerate(folds) if j != i for q in fold]
        best = max(range(len(table)), key=lambda c: (_mean(table[c], train), -c))
        chosen.append(best)
        chosen_scores.append(_mean(table[best], test))
        default_scores.append(_mean(table[default], test))
        held_out.update({q: table[best][q] for q in test})
    return CrossValidation(chosen, chosen_scores, default_scores, held_out)


def score_candidates(
    arms: Arms,
    qrels: Mapping[str, Mapping[str, int]],
    candidates: Sequence[FusionSettings],
    *,
    measure: str = "ndcg@10",
    depth: int = 100,
) -> list[dict[str, float]]:
    """Per-query ``measure`` of every candidate, fused from the arms' cached lists."""
    if measure not in MEASURES:
        raise ConfigError(f"unknown measure {measure!r}; allowed: {', '.join(MEASURES)}")
    if arms.dense is None:
        raise ConfigError(f"fusion cannot be tuned without the dense arm: {arms.dense_reason}")
    deepest = max(c.overfetch for c in candidates)
    if deepest > arms.limit:
        raise ConfigError(f"candidates over-fetch {deepest} but the arms were fetched to {arms.limit}")
    table = []
    for settings in candidates:
        rankings = {
            q: doc_ranking(arms.ranked(settings, q), arms.doc_of, depth)
            for q in qrels
        }
        table.append(per_query(qrels, run_from_rankings(rankings), measures={measure: MEASURES[measure]})[measure])
    return table


def tune(
    arms: Arms,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    dataset: str,
    split: str,
    embedder: str | None,
    defaults: FusionSettings,
    folds: int = 5,
    seed: int = 0,
    measure: str = "ndcg@10",
    depth: int = 100,
    candidates: Sequence[FusionSettings] | None = None,
) -> TuneReport:
    """Cross-validated search over ``candidates`` (default :func:`candidate_grid`)."""
    started = time.perf_counter()
    grid = list(candidates) if candidates is not None else candidate_grid(defaults)
    if not grid or grid[0] != defaults:
        grid = [defaults, *[g for g in grid if g != defaults]]
    fold_ids = split_folds(list(qrels), folds, seed=seed)
    table = score_candidates(arms, qrels, grid, measure=measure, depth=depth)
    cv = cross_validate(table, fold_ids, default=0)
    everyone = [q for fold in fold_ids for q in fold]
    best_all = max(range(len(grid)), key=lambda c: (_mean(table[c], everyone), -c))
    held_out = _mean(cv.held_out, everyone)
    default_score = _mean(table[0], everyone)
    return TuneReport(
        dataset=dataset,
        split=split,
        embedder=embedder,
        measure=measure,
        folds=folds,
        seed=seed,
        queries=len(everyone),
        candidates=len(grid),
        defaults=defaults,
        chosen=grid[best_all],
        held_out_score=round(held_out, 6),
        default_score=round(default_score, 6),
        gain=round(held_out - default_score, 6),
        fold_results=[
            FoldResult(
                fold=i,
                queries=len(fold_ids[i]),
                chosen=grid[c],
                chosen_score=round(cv.chosen_scores[i], 6),
                default_score=round(cv.default_scores[i], 6),
            )
            for i, c in enumerate(cv.chosen)
        ],
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
    )
