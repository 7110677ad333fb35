"""The tuner chooses on training folds only and reports held-out figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import collect_arms
from plait.evaluation.tuner import (
    candidate_grid,
    cross_validate,
    score_candidates,
    split_folds,
    tune,
)
from plait.types import FusionMethod, FusionSettings

FOLDS = [["q1", "q2"], ["q3", "q4"], ["q5", "q6"]]
QUERIES = [q for fold in FOLDS for q in fold]
DEFAULTS = dict.fromkeys(QUERIES, 0.5)
TRAP = {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0, "q5": 0.0, "q6": 0.0}  # perfect on fold 0 only
STEADY = {"q1": 0.2, "q2": 0.2, "q3": 0.6, "q4": 0.6, "q5": 0.6, "q6": 0.6}


def test_the_trap_is_never_chosen_for_the_fold_it_is_perfect_on() -> None:
    cv = cross_validate([DEFAULTS, TRAP, STEADY], FOLDS, default=0)
    # fold 0 held out: train q3..q6 → defaults 0.5, trap 0.0, steady 0.6 → steady
    # fold 1 held out: train q1,q2,q5,q6 → defaults 0.5, trap 0.5, steady 0.4 → tie, defaults first
    # fold 2 held out: train q1..q4 → defaults 0.5, trap 0.5, steady 0.4 → defaults
    assert cv.chosen == [2, 0, 0]
    assert cv.chosen_scores == pytest.approx([0.2, 0.5, 0.5])
    assert cv.default_scores == pytest.approx([0.5, 0.5, 0.5])
    assert cv.held_out == pytest.approx({"q1": 0.2, "q2": 0.2, "q3": 0.5, "q4": 0.5, "q5": 0.5, "q6": 0.5})


@settings(max_examples=60, deadline=None)
@given(
    table=st.lists(
        st.fixed_dictionaries({q: st.floats(0, 1) for q in QUERIES}), min_size=1, max_size=5
    ),
    noise=st.lists(st.floats(0, 1), min_size=6, max_size=6),
)
def test_held_out_scores_never_influence_the_choice(table: list[dict[str, float]], noise: list[float]) -> None:
    before = cross_validate(table, FOLDS)
    for i, fold in enumerate(FOLDS):
        changed = [dict(row) for row in table]
        for row in changed:
            for n, q in enumerate(fold):
                row[q] = noise[(i * 2 + n) % len(noise)]
        after = cross_validate(changed, FOLDS)
        assert after.chosen[i] == before.chosen[i]


def test_folds_are_disjoint_cover_everything_and_repeat() -> None:
    ids = [f"q{i}" for i in range(23)]
    folds = split_folds(ids, 5, seed=3)
    assert sorted(q for fold in folds for q in fold) == sorted(ids)
    assert [len(f) for f in folds] == [5, 5, 5, 4, 4]
    assert folds == split_folds(ids, 5, seed=3)
    assert folds != split_folds(ids, 5, seed=4)
    with pytest.raises(ConfigError, match="at least 2 folds"):
        split_folds(ids, 1)
    with pytest.raises(ConfigError, match="3 queries cannot be split into 5 folds"):
        split_folds(ids[:3], 5)


def test_grid_starts_with_the_defaults_and_has_no_duplicates() -> None:
    grid = candidate_grid()
    assert grid[0] == FusionSettings()
    assert len({g.model_dump_json() for g in grid}) == len(grid)
    # the default (adaptive) first, then the RRF and weighted grids
    assert grid[0].method == FusionMethod.ADAPTIVE
    assert {g.method for g in grid[1:]} == {FusionMethod.RRF, FusionMethod.WEIGHTED}
    assert {g.overfetch for g in grid} == {20, 50, 100, 200}


def test_tune_reports_held_out_figures_on_a_real_index(tiny_beir: Path, tmp_path: Path) -> None:
    with prepared(tiny_beir, embedder=FakeEmbedder(), cache=tmp_path / "cache") as ready:
        queries = {q: ready.dataset.queries[q] for q in ready.dataset.query_ids}
        arms = collect_arms(ready.store, ready.collection, queries, embedder=ready.embedder, limit=200)
        grid = candidate_grid()[:12]
        report = tune(
            arms, ready.dataset.qrels, dataset="tiny", split="test", embedder="fake/hash-64",
            defaults=FusionSettings(), folds=2, seed=0, candidates=grid,
        )
        table = score_candidates(arms, ready.dataset.qrels, grid)
    folds = split_folds(list(ready.dataset.qrels), 2, seed=0)
    cv = cross_validate(table, folds)
    assert report.queries == 4 and report.candidates == 12 and report.folds == 2
    assert [f.queries for f in report.fold_results] == [2, 2]
    assert [f.chosen for f in report.fold_results] == [grid[c] for c in cv.chosen]
    assert report.held_out_score == pytest.approx(sum(cv.held_out.values()) / 4, abs=1e-6)
    assert report.default_score == pytest.approx(sum(table[0].values()) / 4, abs=1e-6)
    assert report.gain == pytest.approx(report.held_out_score - report.default_score, abs=1e-6)
    assert report.chosen in grid
