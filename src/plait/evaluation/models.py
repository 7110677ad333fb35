"""The evaluation's result models: what ``plait eval --json`` and ``plait tune --json`` print.

Like every plait model they serialise to camelCase (:func:`plait.types.to_json`).
Metric names are the report's: ``ndcg@10``, ``recall@10``, ``recall@100``, ``mrr@10``.
"""

from __future__ import annotations

from pydantic import Field

from plait.types import FusionSettings, IndexReport, Model

__all__ = [
    "Comparison",
    "EvalReport",
    "FoldResult",
    "SliceMetrics",
    "StrategyResult",
    "TuneReport",
]


class SliceMetrics(Model):
    """One strategy's mean metrics over one slice of the judged queries."""

    slice: str
    queries: int
    metrics: dict[str, float]


class StrategyResult(Model):
    """One strategy: its metrics per slice, or why it could not run.

    ``settings`` are the fusion settings used (None for a single arm); ``mean_docs``
    is the mean number of distinct documents retrieved per query (at most ``depth``).
    """

    strategy: str
    available: bool
    reason: str | None = None
    settings: FusionSettings | None = None
    slices: list[SliceMetrics] = Field(default_factory=list)
    mean_docs: float = 0.0
    elapsed_ms: float = 0.0


class Comparison(Model):
    """Per-query comparison of a strategy against a baseline on one measure."""

    strategy: str
    baseline: str
    measure: str
    better: int
    worse: int
    tied: int
    mean_delta: float


class EvalReport(Model):
    """The outcome of ``plait eval``: every strategy per slice, with the context to reproduce it."""

    dataset: str
    dataset_path: str
    split: str
    corpus_docs: int
    chunks: int
    queries: int
    slice_counts: dict[str, int]
    slice_rule: str
    embedder: str | None
    depth: int
    metric_provider: str
    strategies: list[StrategyResult]
    comparisons: list[Comparison] = Field(default_factory=list)
    #: relevant documents the qrels name that the collection does not hold (a corpus
    #: id mismatch, a skipped corpus line): every strategy misses them
    relevant_not_indexed: list[str] = Field(default_factory=list)
    index: IndexReport | None = None
    cache: dict[str, int] = Field(default_factory=dict)
    machine: dict[str, str] = Field(default_factory=dict)
    date: str
    elapsed_ms: float = 0.0

    def strategy(self, name: str) -> StrategyResult:
        """The result of strategy ``name`` (KeyError if it was not run)."""
        for result in self.strategies:
            if result.strategy == name:
                return result
        raise KeyError(name)

    def metric(self, strategy: str, measure: str, slice_name: str = "all") -> float | None:
        """One figure, or None if the strategy was unavailable or the slice is empty."""
        for item in self.strategy(strategy).slices:
            if item.slice == slice_name:
                return item.metrics.get(measure)
        return None


class FoldResult(Model):
    """One cross-validation fold: settings chosen on the other folds, scored on this one."""

    fold: int
    queries: int
    chosen: FusionSettings
    chosen_score: float
    default_score: float


class TuneReport(Model):
    """The outcome of ``plait tune``.

    ``held_out_score`` is the mean of ``measure`` over all queries, each scored with
    the settings chosen on the folds it was not in; ``gain`` is that minus the
    defaults' score on the same queries. ``chosen`` is the best setting on all queries
    (what ``--save`` stores); its all-query score is not a held-out figure and is not
    reported as one.
    """

    dataset: str
    split: str
    embedder: str | None
    measure: str
    folds: int
    seed: int
    queries: int
    candidates: int
    defaults: FusionSettings
    chosen: FusionSettings
    held_out_score: float
    default_score: float
    gain: float
    fold_results: list[FoldResult]
    saved_to: str | None = None
    date: str
    elapsed_ms: float = 0.0
