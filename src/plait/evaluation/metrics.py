"""Retrieval metrics, computed by ``ir-measures`` (its ``pytrec_eval`` / trec_eval backend).

Nothing here computes a metric by hand: :func:`per_query` hands the qrels and the run
to :func:`ir_measures.iter_calc` and only arranges the answer. Aggregation is the
arithmetic mean over *every judged query*: a judged query the run has nothing for
scores 0 on every measure (trec_eval's ``-c`` convention, and BEIR's), so a strategy
cannot look better by returning nothing.

The measures are trec_eval's: ``nDCG@10`` (linear gain, ``log2(rank + 1)`` discount),
``R@10`` / ``R@100`` (fraction of the relevant documents in the top k) and ``RR@10``
(reciprocal rank of the first relevant document in the top 10, i.e. MRR@10 once
averaged). Relevance is a grade > 0.

``ir-measures`` is the ``eval`` extra: ``pip install 'plait[eval]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plait.errors import ConfigError

__all__ = [
    "EVAL_INSTALL_HINT",
    "MEASURES",
    "Run",
    "mean_scores",
    "measure_label",
    "per_query",
    "run_from_rankings",
]

EVAL_INSTALL_HINT = "pip install 'plait[eval]'"

#: Report name → ir-measures measure name.
MEASURES: dict[str, str] = {
    "ndcg@10": "nDCG@10",
    "recall@10": "R@10",
    "recall@100": "R@100",
    "mrr@10": "RR@10",
}

def measure_label(measure: str, depth: int, *, short: bool = False) -> str:
    """What a table calls report measure ``measure`` (``short``: ir-measures' name, as
    ``R@100``). A run cut at ``depth`` < 100 documents has recall@100 equal to recall at
    that depth, and is labelled so.

    >>> measure_label("recall@100", 100), measure_label("recall@100", 20), measure_label("recall@100", 20, short=True)
    ('recall@100', 'recall@20', 'R@20')
    """
    name = MEASURES[measure] if short else measure
    if measure == "recall@100" and depth < 100:
        return name.replace("100", str(depth))
    return name


Run = dict[str, dict[str, float]]
"""query id → {document id → score}; a higher score ranks first."""


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(f"evaluation needs ir-measures: {EVAL_INSTALL_HINT}") from exc
    return ir_measures


def run_from_rankings(rankings: Mapping[str, Sequence[str]]) -> Run:
    """A run from ranked document ids: rank r of n gets score ``n - r`` (r from 0).

    Scores are strictly decreasing so trec_eval's order (score, then document id) is
    exactly the given order. Repeated ids keep their first (best) position.
    """
    run: Run = {}
    for qid, docs in rankings.items():
        unique = list(dict.fromkeys(docs))
        n = len(unique)
        run[qid] = {doc: float(n - position) for position, doc in enumerate(unique)}
    return run


def per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    *,
    measures: Mapping[str, str] = MEASURES,
) -> dict[str, dict[str, float]]:
    """Every measure for every judged query: ``{measure name: {query id: value}}``.

    Judged queries missing from the run (or whose run is empty) get 0.0.
    """
    irm = _ir_measures()
    parsed = {name: irm.parse_measure(spec) for name, spec in measures.items()}
    by_measure = {str(m): name for name, m in parsed.items()}
    qrels_dict = {qid: {did: int(g) for did, g in docs.items()} for qid, docs in qrels.items()}
    run_dict = {
        qid: {did: float(s) for did, s in docs.items()}
        for qid, docs in run.items()
        if qid in qrels_dict and docs
    }
    out: dict[str, dict[str, float]] = {name: dict.fromkeys(qrels_dict, 0.0) for name in measures}
    if run_dict:
        for metric in irm.iter_calc(list(parsed.values()), qrels_dict, run_dict):
            name = by_measure.get(str(metric.measure))
            if name is not None and metric.query_id in qrels_dict:
                out[name][metric.query_id] = float(metric.value)
    return out


def mean_scores(
    scores: Mapping[str, Mapping[str, float]], query_ids: Sequence[str] | None = None
) -> dict[str, float]:
    """The mean of each measure over ``query_ids`` (default: every query scored); 0.0 if none."""
    means: dict[str, float] = {}
    for name, values in scores.items():
        ids = list(values) if query_ids is None else list(query_ids)
        means[name] = sum(values.get(q, 0.0) for q in ids) / len(ids) if ids else 0.0
    return means
