"""Retrieval evaluation: BEIR datasets, strategies per query slice, a fusion tuner, reports.

>>> from plait.evaluation import prepared, evaluate                 # doctest: +SKIP
>>> with prepared("data/scifact", embedder="none") as ready:       # doctest: +SKIP
...     report = evaluate(ready.dataset, store=ready.store, collection=ready.collection,
...                       embedder=ready.embedder, strategies=["bm25"]).report

Metrics come from ``ir-measures`` and the plot from matplotlib: ``pip install 'plait[eval]'``.
The CLI commands (``plait eval``, ``plait tune``) live in :mod:`plait.cli.eval`.
"""

from __future__ import annotations

from plait.evaluation.datasets import BeirDataset, load_beir
from plait.evaluation.metrics import MEASURES, mean_scores, per_query, run_from_rankings
from plait.evaluation.models import (
    Comparison,
    EvalReport,
    FoldResult,
    SliceMetrics,
    StrategyResult,
    TuneReport,
)
from plait.evaluation.prepare import Prepared, prepared
from plait.evaluation.report import render_html, render_markdown, write_html
from plait.evaluation.runner import STRATEGIES, EvalOutcome, collect_arms, evaluate
from plait.evaluation.slices import classify, slice_ids
from plait.evaluation.tuner import candidate_grid, cross_validate, split_folds, tune

__all__ = [
    "MEASURES",
    "STRATEGIES",
    "BeirDataset",
    "Comparison",
    "EvalOutcome",
    "EvalReport",
    "FoldResult",
    "Prepared",
    "SliceMetrics",
    "StrategyResult",
    "TuneReport",
    "candidate_grid",
    "classify",
    "collect_arms",
    "cross_validate",
    "evaluate",
    "load_beir",
    "mean_scores",
    "per_query",
    "prepared",
    "render_html",
    "render_markdown",
    "run_from_rankings",
    "slice_ids",
    "split_folds",
    "tune",
    "write_html",
]
