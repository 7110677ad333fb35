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
