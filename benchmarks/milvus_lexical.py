"""The Milvus store's BM25 arm against the embedded store's, on SciFact (lexical only).

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/milvus_lexical.py
    PYTHONPATH=src .venv/bin/python benchmarks/milvus_lexical.py --queries 50   # quicker

The SciFact corpus (5,183 abstracts, read in place from ``../shared/data/scifact`` or
``--data``) is indexed with the product's own path (:meth:`plait.service.Plait.index`,
no embedder) into a fresh SQLite store and a fresh milvus-lite store in the same run.
Every judged test query is sent to each store's lexical arm exactly as
:mod:`plait.evaluation.runner` sends it (same analysis, 100 chunks per query, documents
ranked by their best chunk, cut at 100), and nDCG@10, recall@100 and MRR@10 are scored
with ir-measures on ``qrels/test.tsv``. Also reported: how many queries have the same
top-3 documents on both stores, the wall time to index and to query, and (for
milvus-lite) how many segments hold the chunks — its BM25 statistics are per segment.

Results go to ``benchmarks/results/milvus_lexical.json``.

``--variants`` instead times the Milvus lexical arm before 8f320bc (frozen in
``milvus_lexical_v1.py``: each field's top ``limit`` plus filtered fill-in searches)
and now (unfiltered lists grown to a threshold stop), interleaved query by query on one
store in one run at ``limit=100``, and counts how many queries return exactly
``limit=None``'s first 100 (ids and scores; parity with SQLite is the store contract's
test); results in
``benchmarks/results/milvus_lexical_variants.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.evaluation.datasets import load_beir
from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings
from plait.evaluation.runner import collect_arms, doc_ranking
from plait.service import Plait
from plait.stores.base import Store
from plait.stores.milvus import MilvusStore
from plait.stores.sqlite import SQLiteStore

MEASURES = {"ndcg@10": "nDCG@10", "recall@100": "R@100", "mrr@10": "RR@10"}
DEPTH = 100
COLLECTION = "scifact"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("pymilvus", "milvus-lite", "ir-measures")}


def _measure(store: Store, dataset: Any, queries: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    with Plait(store, embedder="none") as engine:
        report = engine.index(dataset.corpus_path, collection=COLLECTION, scope="docs")
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        arms = collect_arms(store, COLLECTION, queries, embedder=None, limit=DEPTH)
        query_s = time.perf_counter() - started
        rankings = {
            qid: doc_ranking([cid for cid, _ in ranked], arms.doc_of, DEPTH)
            for qid, ranked in arms.lexical.items()
        }
        qrels = {qid: dataset.qrels[qid] for qid in queries}
        scores = per_query(qrels, run_from_rankings(rankings), measures=MEASURES)
        extra: dict[str, Any] = {}
        if isinstance(store, MilvusStore):
            extra = _segments(store)
        return {
            "sources_indexed": report.sources_indexed,
            "chunks": store.get_collection(COLLECTION).chunks,  # type: ignore[union-attr]
            "index_seconds": round(index_s, 1),
            "query_seconds": round(query_s, 2),
            "ms_per_query": round(1000 * query_s / max(len(queries), 1), 2),
            "means": {k: round(v, 4) for k, v in mean_scores(scores).items()},
            "per_query_ndcg10": scores["ndcg@10"],
            "rankings": rankings,
            **extra,
        }


def _segments(store: MilvusStore) -> dict[str, Any]:
    """How many milvus-lite segments hold the chunk collection (BM25 stats are per segment)."""
    rec = store._record(COLLECTION)
    name = rec["layout"]["name"]
    try:
        from milvus_lite.server_manager import server_manager_instance  # type: ignore[import-untyped]

        server = server_manager_instance._servers.get(str(Path(store.uri).resolve()))
        if server is None:
            return {}
        db = server[1]
        col = next((c for (_, n), c in db._collections.items() if n == name), None)
        segments = getattr(col, "_segment_cache", None) if col is not None else None
        memtable = getattr(col, "_memtable", None)
        return {
            "lite_flushed_segments": len(segments) if segments is not None else None,
            "lite_memtable_rows": len(list(memtable.pk_index_snapshot())) if memtable is not None else None,
        }
    except Exception:
        return {}


def _lookalike(store: MilvusStore, n: int, queries: int) -> dict[str, Any]:
    """``n`` chunks of 40 words drawn from 12 (the store contract's look-alike corpus,
    scaled): queries are every (n // queries)-th chunk's first 12 words."""
    import random

    from plait.analysis import analyse_query
    from plait.testing.contract import make_chunk

    words = ["checkout", "payment", "declined", "card", "token", "session", "refund",
             "ledger", "invoice", "ERR-4012", "SKU-88213-B", "resolve_tenant_db"]
    rng = random.Random(7)
    store.ensure_collection(COLLECTION)
    texts = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(n)]
    for s in range(0, n, 500):
        sid = f"doc{s // 500}.md"
        store.replace_source(COLLECTION, sid, "docs", [
            make_chunk(f"c{i}", texts[i], source_id=sid, ordinal=i - s) for i in range(s, min(s + 500, n))
        ])
    step = max(n // queries, 1)
    return {f"c{i}": analyse_query(" ".join(texts[i].split()[:12])) for i in range(0, n, step)[:queries]}


def _variants(args: argparse.Namespace, dataset: Any, queries: dict[str, str]) -> None:
    from statistics import median

    from plait.analysis import analyse_query

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from milvus_lexical_v1 import lexical_before

    analysed = {qid: analyse_query(text) for qid, text in queries.items()}
    with tempfile.TemporaryDirectory(prefix="plait-milvus-variants-") as scratch:
        milvus = MilvusStore(str(Path(scratch) / "plait.db"))
        engine = Plait(milvus, embedder="none")  # closed at the end: closing closes the store
        if args.lookalike:
            analysed = _lookalike(milvus, args.lookalike, len(queries))
        else:
            engine.index(dataset.corpus_path, collection=COLLECTION, scope="docs")
        times: dict[str, list[float]] = {"before": [], "after": []}
        same_full = {"before": 0, "after": 0}
        for q in analysed.values():
            full = milvus.lexical_search(COLLECTION, q.exact, q.stems, limit=None)[:DEPTH]
            for variant in ("before", "after"):
                started = time.perf_counter()
                if variant == "before":
                    got = lexical_before(milvus, COLLECTION, q.exact, q.stems, limit=DEPTH)
                else:
                    got = milvus.lexical_search(COLLECTION, q.exact, q.stems, limit=DEPTH)
                times[variant].append(1000 * (time.perf_counter() - started))
                same_full[variant] += got == full
        info = milvus.get_collection(COLLECTION)
        chunks = info.chunks if info is not None else None
        engine.close()
    p50 = {v: round(median(t), 1) for v, t in times.items()}
    out = {
        "what": "Milvus lexical arm, limit=100, before 8f320bc (filtered fill-in) vs after (threshold stop), "
                "interleaved per query on one milvus-lite store, same run",
        "machine": "busy machine: 2 cores shared by 7 engineers (load figures in the run note)",
        "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": _versions(),
        "corpus": f"look-alike x{args.lookalike}" if args.lookalike else "scifact",
        "queries": len(analysed),
        "chunks": chunks,
        "p50_ms": p50,
        "mean_ms": {v: round(sum(t) / len(t), 1) for v, t in times.items()},
        "ratio_after_over_before_p50": round(p50["after"] / p50["before"], 2),
        "equal_to_limit_none_first_100": same_full,
    }
    out_path = Path(args.out).with_name("milvus_lexical_variants.json")
    out_path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "scifact"))
    parser.add_argument("--queries", type=int, default=0, help="only the first N judged queries (0: all)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "milvus_lexical.json"))
    parser.add_argument("--variants", action="store_true", help="time the lexical arm before/after 8f320bc")
    parser.add_argument("--lookalike", type=int, default=0,
                        help="with --variants: N synthetic look-alike chunks instead of SciFact")
    args = parser.parse_args()

    dataset = load_beir(args.data, split="test")
    ids = dataset.query_ids[: args.queries] if args.queries else dataset.query_ids
    queries = {qid: dataset.queries[qid] for qid in ids}
    if args.variants:
        _variants(args, dataset, queries)
        return
    with tempfile.TemporaryDirectory(prefix="plait-milvus-bench-") as scratch:
        results = {
            "sqlite": _measure(SQLiteStore(Path(scratch) / "plait.sqlite"), dataset, queries),
            "milvus-lite": _measure(MilvusStore(str(Path(scratch) / "plait.db")), dataset, queries),
        }
    sqlite, milvus = results["sqlite"], results["milvus-lite"]
    same_top3 = sum(sqlite["rankings"][q][:3] == milvus["rankings"][q][:3] for q in queries)
    same_top1 = sum(sqlite["rankings"][q][:1] == milvus["rankings"][q][:1] for q in queries)
    delta = milvus["means"]["ndcg@10"] - sqlite["means"]["ndcg@10"]
    out = {
        "what": "BM25 arm only (no embedder), SciFact test queries, documents ranked by best chunk",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "versions": _versions(),
        "dataset": {"name": "scifact", "split": "test", "queries": len(queries), "corpus": dataset.corpus_size()},
        "ndcg10": {"sqlite": sqlite["means"]["ndcg@10"], "milvus-lite": milvus["means"]["ndcg@10"],
                   "delta": round(delta, 4), "within_0.01": abs(delta) <= 0.01},
        "same_top3_queries": same_top3,
        "same_top1_queries": same_top1,
        "stores": {
            name: {k: v for k, v in r.items() if k not in ("rankings", "per_query_ndcg10")}
            for name, r in results.items()
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: out[k] for k in ("ndcg10", "same_top3_queries", "same_top1_queries")}, indent=2))
    for name, r in out["stores"].items():
        print(name, r)


if __name__ == "__main__":
    main()
