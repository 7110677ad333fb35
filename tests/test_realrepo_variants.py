"""benchmarks/realrepo_variants.py's own helpers on a real SQLite store: weighted lexical
expansion is the query's BM25 plus the weight times the added stems' BM25, document
outlines are a file's title and distinct headings, and the outline rescoring of the dense
arm is ``(cosine + beta * outline cosine) / (1 + beta)``."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from plait.collection_settings import read_settings
from plait.embeddings.fake import FakeEmbedder
from plait.evaluation.runner import collect_arms
from plait.retrieval.plan import lexical_terms, saved_fusion
from plait.service import Plait

_SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "realrepo_variants.py"


def _variants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plait_bench_realrepo_variants", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def context(tmp_path: Path) -> Iterator[tuple[ModuleType, Any]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text(
        "# Deploying\n\n## Release cadence\n\nWe ship on Tuesdays.\n\n## Rollback\n\nRedeploy the previous build.\n",
        encoding="utf-8",
    )
    (docs / "notes.md").write_text("Plain notes about the weekly release train.\n", encoding="utf-8")
    variants = _variants()
    embedder = FakeEmbedder()
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        engine.index(docs)
        texts = {"q": "when do we ship"}
        arms = collect_arms(engine.store, "default", texts, embedder=embedder, limit=100)
        ctx = variants.Context(
            store=engine.store, collection="default", saved=saved_fusion(read_settings(engine.store, "default")),
            languages=arms.languages, texts=texts, lexical=arms.lexical, dense=arms.dense or {},
            doc_of=dict(arms.doc_of), depth=100,
        )
        ctx.load_vectors(embedder)
        yield variants, ctx


def test_weighted_terms_add_the_weighted_bm25_of_the_added_stems(context: tuple[ModuleType, Any]) -> None:
    variants, ctx = context
    exact, stems = lexical_terms("when do we ship")
    own = dict(ctx.store.lexical_search("default", exact, stems, limit=None))
    added = dict(ctx.store.lexical_search("default", [], ["releas"], limit=None))
    assert added, "the added stem matches chunks of both files"
    got = dict(variants._with_terms(ctx, "q", ["releas"], 0.5))
    for cid in set(own) | set(added):
        assert got[cid] == pytest.approx(own.get(cid, 0.0) + 0.5 * added.get(cid, 0.0))
    # weight 1 is one search with the stem in the query (BM25 sums over terms)
    union = dict(ctx.store.lexical_search("default", exact, [*stems, "releas"], limit=None))
    assert dict(variants._with_terms(ctx, "q", ["releas"], 1.0)) == pytest.approx(union)
    assert variants._with_terms(ctx, "q", [], 0.5) == ctx.lexical["q"]


def test_outline_is_the_title_and_distinct_headings(context: tuple[ModuleType, Any]) -> None:
    variants, ctx = context
    outlines = variants._outlines(ctx)
    assert outlines["deploy.md"] == "Deploying\nRelease cadence\nRollback"
    assert outlines["notes.md"] == "notes.md"  # no title: the file name


def test_dense_plus_rescales_cosine_and_extra(context: tuple[ModuleType, Any]) -> None:
    variants, ctx = context
    extra = np.arange(len(ctx.ids), dtype=np.float32) / 10
    cosine = ctx.matrix @ ctx.queries["q"]
    ranked = dict(variants._dense_plus(ctx, "q", extra, 0.5))
    for i, cid in enumerate(ctx.ids):
        assert ranked[cid] == pytest.approx((cosine[i] + 0.5 * extra[i]) / 1.5, abs=1e-6)


# --- fourth round (benchmarks/realrepo_round4.py): how file scores are made -------------

def _round4() -> ModuleType:
    bench = str(_SCRIPT.parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)  # round 4 imports its siblings by name, as realrepo.py does
    import realrepo_round4

    return realrepo_round4


def test_monotone_moments_and_expected_max_by_hand() -> None:
    r4 = _round4()
    assert r4.monotone([0.9, 0.5, 0.7, 0.2]) == [0.9, 0.5, 0.5, 0.2]
    mean, std = r4.moments([3.0, 1.0], 4)  # 3, 1, 0, 0
    assert (mean, std) == pytest.approx((1.0, 1.5**0.5))
    assert r4.expected_max(1) == 0.0
    assert r4.expected_max(2) == pytest.approx(0.58946, abs=1e-5)  # Φ⁻¹(1.625 / 2.25)
    assert r4.expected_max(4) == pytest.approx(1.04913, abs=1e-5)  # Φ⁻¹(3.625 / 4.25)


def test_file_scores_length_prior_zmax_and_rankn_by_hand() -> None:
    r4 = _round4()
    ranked = [("a1", 0.9), ("b1", 0.8), ("a2", 0.7), ("c1", 0.5)]
    doc_of = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}
    sizes = {"A": (4, 400), "B": (1, 100), "C": (2, 200), "D": (8, 800)}  # D has no hit; median chunks 3
    scores, first = r4.file_scores(ranked, doc_of, r4.MAX, sizes=sizes)
    assert scores == {"A": 0.9, "B": 0.8, "C": 0.5} and first == {"A": 0, "B": 1, "C": 3}
    assert r4.order(scores, first) == ["A", "B", "C"]
    prior, _ = r4.file_scores(ranked, doc_of, r4.Aggregation("prior", -0.1), sizes=sizes)
    # best + λ·ln(chunks / 3): A 0.9 − 0.1·ln(4/3), B 0.8 − 0.1·ln(1/3), C 0.5 − 0.1·ln(2/3)
    assert prior == pytest.approx({"A": 0.871232, "B": 0.909861, "C": 0.540547}, abs=1e-6)
    assert r4.order(prior, first) == ["B", "A", "C"]
    chars, _ = r4.file_scores(ranked, doc_of, r4.Aggregation("prior", 0.1, "chars"), sizes=sizes)
    assert chars["B"] == pytest.approx(0.8 + 0.1 * -1.098612, abs=1e-6)  # ln(100 / 300)
    zmax, _ = r4.file_scores(ranked, doc_of, r4.Aggregation("zmax", 1.0), sizes=sizes, mean=0.5, std=0.2)
    # (best − 0.5) / 0.2 − E[max of n]: A 2 − 1.04913, B 1.5 − 0, C 0 − 0.58946
    assert zmax == pytest.approx({"A": 0.95087, "B": 1.5, "C": -0.58946}, abs=1e-5)
    rankn, _ = r4.file_scores(ranked, doc_of, r4.Aggregation("rankn", 1.0), sizes=sizes)
    assert rankn == pytest.approx({"A": -2.0, "B": -1.5, "C": -7.0})  # −(r − 0.5)·n


def test_file_bm25_by_hand() -> None:
    r4 = _round4()
    fields = {"c1": (["x"], ["ship"]), "c2": (["y"], ["ship", "ship"]), "c3": (["z"], ["roll"])}
    index = r4.bm25_index(fields, {"c1": "F", "c2": "F", "c3": "G"})
    assert index.lengths == {"F": (2, 3), "G": (1, 1)}
    # N 2, df 1: idf ln(1 + 1.5 / 1.5) = ln 2; F: tf 3, length 3, mean length 2
    got = r4.bm25(index, [], ["ship", "ship"], r4.BM25Params(k1=0.9, b=0.4))  # a repeated term counts once
    assert got == [("F", pytest.approx(0.6931472 * 3 * 1.9 / (3 + 0.9 * (0.6 + 0.4 * 1.5))))]
    assert r4.bm25(index, [], ["ship"], r4.BM25Params(k1=0.9, b=0.0))[0][1] == pytest.approx(1.0130613)


def test_chunk_level_bm25_is_the_stores(context: tuple[ModuleType, Any]) -> None:
    r4 = _round4()
    _, ctx = context
    index = r4.bm25_index(r4.chunk_fields(ctx))
    for query in ("when do we ship", "Redeploy the previous build", "weekly release train notes"):
        exact, stems = lexical_terms(query)
        for params in (r4.BM25Params(), r4.BM25Params(k1=1.5, b=0.75)):
            want = ctx.store.lexical_search("default", exact, stems, limit=None, params=params)
            got = r4.bm25(index, exact, stems, params)
            assert [c for c, _ in got] == [c for c, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_fused_max_is_the_default_and_the_prior_reorders(context: tuple[ModuleType, Any]) -> None:
    variants, ctx = context
    r4 = _round4()
    default = variants.rankings(ctx, variants.default, ["q"], 10)
    assert variants.rankings(ctx, r4.VARIANTS4["fused-max"], ["q"], 10) == default
    sizes = r4.sizes(ctx)
    assert sizes["notes.md"][0] == 1 and sizes["deploy.md"][0] > 1  # the heading sections are chunks of their own
    assert sizes["notes.md"][1] == len(ctx.store.get_chunks("default", [c for c in ctx.ids if ctx.doc_of[c] == "notes.md"]).popitem()[1].content)
    ranked, _, _ = r4.fused_ranked(ctx, "q", False)
    best, first = r4.file_scores(ranked, ctx.doc_of, r4.MAX, sizes=sizes)
    assert r4.order(best, first) == ["deploy.md", "notes.md"]  # "we ship" is in deploy.md
    # the prior terms differ by λ·ln(n_deploy / 1) whatever the median: it reorders the
    # files exactly when −λ·ln n exceeds the gap of their best fused scores
    gap, log_n = best["deploy.md"] - best["notes.md"], float(np.log(sizes["deploy.md"][0]))
    for lam, top in ((-(gap - 0.01) / log_n, "deploy.md"), (-(gap + 0.01) / log_n, "notes.md")):
        prior, _ = r4.file_scores(ranked, ctx.doc_of, r4.Aggregation("prior", lam), sizes=sizes)
        assert r4.order(prior, first)[0] == top
