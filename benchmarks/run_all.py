"""Speed, measured side by side: one command writes benchmarks/results/performance.{json,md}.

    .venv/bin/pip install -e '.[all,bench]'
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=src .venv/bin/python benchmarks/run_all.py [--quick]

(the two OpenBLAS variables this machine sets slow a current numpy's matrix products;
the command clears them for the benchmark only). About 10 minutes on 2 cores.

Parts: (a) the lexical arm on SciFact test queries, one thread, against bm25s and
rank_bm25; (b) the dense arm exact vs HNSW on synthetic 384-d vectors of low intrinsic
dimension (10k, 100k; 1M is skipped: its build does not fit the run's time budget on 2
cores); (c) hybrid end-to-end latency at SciFact size with query embedding excluded;
(d) reindex of an unchanged corpus vs the first index; (e) peak memory per 100k chunks.
Every figure is a median of repeated runs. Speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SCIFACT = Path("/work/shared/data/scifact")
DIM = 384


def machine() -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for p in threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


def _median_rate(fn: Any, n_items: int, repeats: int) -> float:
    """Median items/s over ``repeats`` runs of ``fn`` (which processes ``n_items``)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return n_items / statistics.median(times)


def scifact() -> tuple[list[dict[str, str]], dict[str, str]]:
    corpus = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open(encoding="utf-8"))}
    test_ids = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    return corpus, {q: queries[q] for q in sorted(test_ids) if q in queries}


# (a) + (d) lexical arm, reindex ---------------------------------------------------
def lexical(tmp: Path, repeats: int) -> dict[str, Any]:
    from plait.analysis import analyse_query
    from plait.service import Plait

    corpus, queries = scifact()
    texts = list(queries.values())
    db = tmp / "lex.db"
    with Plait(str(db), embedder="none") as p:
        t = time.perf_counter()
        first = p.index(SCIFACT / "corpus.jsonl", collection="sf")
        first_s = time.perf_counter() - t
        re_times = []
        for _ in range(repeats):
            t = time.perf_counter()
            again = p.reindex(collection="sf")
            re_times.append(time.perf_counter() - t)
        store = p.store
        doc_of = {c.id: c.source_id for c in store.get_chunks("sf", store.chunk_ids("sf")).values()}

        def plait_run() -> list[list[str]]:
            out = []
            for q in texts:
                a = analyse_query(q)
                out.append(store.lexical_search("sf", a.exact, a.stems, limit=10))
            return out

        plait_run()  # warm the postings cache (a long-running server's steady state)
        plait_qps = _median_rate(plait_run, len(texts), repeats)
        plait_top = [list(dict.fromkeys(doc_of[c] for c, _ in hits)) for hits in plait_run()]
    reindex_s = statistics.median(re_times)

    import bm25s
    import Stemmer
    from rank_bm25 import BM25Okapi

    docs = [f"{d.get('title', '')} {d['text']}" for d in corpus]
    ids = [d["_id"] for d in corpus]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def bm25s_run() -> np.ndarray:
        out = []
        for q in texts:
            tok = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
            res, _ = retriever.retrieve(tok, k=10, n_threads=1, show_progress=False)
            out.append(res[0])
        return np.array(out)

    bm25s_qps = _median_rate(bm25s_run, len(texts), repeats)
    bm25s_top = [[ids[i] for i in row] for row in bm25s_run()]
    overlap = statistics.mean(len(set(a[:10]) & set(b)) / 10 for a, b in zip(plait_top, bm25s_top, strict=True))

    okapi = BM25Okapi([stemmer.stemWords(d.lower().split()) for d in docs])

    def okapi_run() -> None:
        for q in texts:
            okapi.get_top_n(stemmer.stemWords(q.lower().split()), ids, n=10)

    okapi_qps = _median_rate(okapi_run, len(texts), max(1, repeats // 2))
    return {
        "lexical": {
            "docs": len(corpus), "chunks": len(doc_of), "queries": len(texts), "k": 10,
            "plait_qps": round(plait_qps, 1), "bm25s_qps": round(bm25s_qps, 1),
            "rank_bm25_qps": round(okapi_qps, 1),
            "ratio_plait_over_bm25s": round(plait_qps / bm25s_qps, 3),
            "top10_doc_overlap_with_bm25s": round(overlap, 3),
        },
        "reindex": {
            "first_index_s": round(first_s, 3), "unchanged_reindex_s": round(reindex_s, 3),
            "speedup": round(first_s / reindex_s, 1),
            "first_chunks_added": first.chunks_added, "reindex_chunks_unchanged": again.chunks_unchanged,
        },
    }


# (c) hybrid end to end ---------------------------------------------------------------
def hybrid(tmp: Path, repeats: int) -> dict[str, Any]:
    from plait.embeddings.fake import FakeEmbedder
    from plait.service import Plait

    _, queries = scifact()
    texts = list(queries.values())

    class Precomputed(FakeEmbedder):
        """Query vectors computed once, before timing: the embedder's cost is excluded."""

        cache: ClassVar[dict[str, np.ndarray]] = {}

        def embed_query(self, text: str) -> np.ndarray:
            return self.cache[text]

    emb = Precomputed(dimension=DIM, model="hash-384")
    with Plait(str(tmp / "hybrid.db"), embedder=emb) as p:
        p.index(SCIFACT / "corpus.jsonl", collection="sf")
        Precomputed.cache = {q: FakeEmbedder.embed_query(emb, q) for q in texts}
        for q in texts:
            p.search(q, collection="sf", k=10)  # warm
        lat: list[float] = []
        for _ in range(repeats):
            for q in texts:
                t = time.perf_counter()
                p.search(q, collection="sf", k=10)
                lat.append((time.perf_counter() - t) * 1000)
        chunks = len(p.store.chunk_ids("sf"))
    return {"hybrid": {
        "chunks": chunks, "queries": len(texts) * repeats, "k": 10, "overfetch": "default (50 per arm)",
        "p50_ms": round(float(np.percentile(lat, 50)), 3), "p95_ms": round(float(np.percentile(lat, 95)), 3),
    }}


# (b) + (e) dense exact vs ANN, in a child process per size (clean peak RSS) --------------
def synthetic(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Vectors of intrinsic dimension 32 mapped linearly into 384-d, plus noise, normalised."""
    rng = np.random.default_rng(seed)
    proj = rng.standard_normal((32, DIM)).astype(np.float32)
    def make(m: int) -> np.ndarray:
        x = rng.standard_normal((m, 32)).astype(np.float32) @ proj
        x += 0.05 * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(DIM) * rng.standard_normal((m, DIM)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    return make(n), make(n_queries)


def _hwm_kb() -> int:
    """This process's peak RSS in KiB (VmHWM: unlike ru_maxrss it does not inherit the
    parent's peak across fork + exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def dense_child(n: int, tmp: Path) -> dict[str, Any]:
    from plait.stores.base import StoredChunk
    from plait.stores.sqlite import SQLiteStore
    from plait.types import Chunk, FileOrigin

    base_rss = _hwm_kb()
    data, queries = synthetic(n, 200)
    db = tmp / f"dense{n}.db"
    exact = SQLiteStore(db, ann_threshold=10**12)
    exact.ensure_collection("v")
    t = time.perf_counter()
    batch = 2000
    for start in range(0, n, batch):
        src = f"s{start}"
        items = [
            StoredChunk(
                Chunk(id=f"c{i}", source_id=src, scope="docs", ordinal=i - start, content=f"chunk {i}",
                      content_hash=f"h{i}", origin=FileOrigin(source_path=src, heading_path=[], title=src),
                      metadata={}),
                ["chunk", str(i)], ["chunk", str(i)], data[i],
            )
            for i in range(start, min(n, start + batch))
        ]
        exact.replace_source("v", src, "docs", items)
    write_s = time.perf_counter() - t
    ann = SQLiteStore(db, ann_threshold=0)
    t = time.perf_counter()
    ann.vector_search("v", queries[0], limit=10)  # loads the matrix, builds and saves the graph
    build_s = time.perf_counter() - t
    exact.vector_search("v", queries[0], limit=10)  # load the matrix
    truth = [[c for c, _ in exact.vector_search("v", q, limit=10)] for q in queries]
    got = [[c for c, _ in ann.vector_search("v", q, limit=10)] for q in queries]
    assert ann.last_vector_path == "ann" and exact.last_vector_path == "exact"
    recall = statistics.mean(len(set(a) & set(b)) / 10 for a, b in zip(got, truth, strict=True))
    exact_qps = _median_rate(lambda: [exact.vector_search("v", q, limit=10) for q in queries], len(queries), 3)
    ann_qps = _median_rate(lambda: [ann.vector_search("v", q, limit=10) for q in queries], len(queries), 3)
    peak_mb = (_hwm_kb() - base_rss) / 1024
    files_mb = sum(p.stat().st_size for p in tmp.glob(f"dense{n}.db*")) / 2**20
    return {
        "n": n, "dim": DIM, "queries": len(queries), "write_s": round(write_s, 1),
        "ann_build_s": round(build_s, 1), "exact_qps": round(exact_qps, 1), "ann_qps": round(ann_qps, 1),
        "speedup": round(ann_qps / exact_qps, 2), "recall_at_10": round(recall, 4),
        "peak_rss_mb": round(peak_mb, 1), "peak_rss_mb_per_100k": round(peak_mb * 100_000 / n, 1),
        "files_mb": round(files_mb, 1),
    }


def dense(sizes: list[int]) -> dict[str, Any]:
    out = []
    for n in sizes:
        proc = subprocess.run([sys.executable, __file__, "--dense-child", str(n)],
                              capture_output=True, text=True, check=True, env=os.environ)
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"  dense {n}: {out[-1]}", flush=True)
    return {"dense": out, "dense_skipped": "1M vectors: the HNSW build alone (~15+ min on 2 cores) "
            "does not fit the ~20 min budget of this run"}


# report ------------------------------------------------------------------------------
def targets(r: dict[str, Any]) -> list[dict[str, str]]:
    lex, hyb, rei = r["lexical"], r["hybrid"], r["reindex"]
    big = max(r["dense"], key=lambda d: d["n"])
    return [
        {"target": "lexical arm >= bm25s queries/s on SciFact (1 thread), with incremental add/delete",
         "measured": f"{lex['plait_qps']} vs {lex['bm25s_qps']} q/s (x{lex['ratio_plait_over_bm25s']})",
         "met": "yes" if lex["ratio_plait_over_bm25s"] >= 1 else "no"},
        {"target": "ANN recall@10 >= 0.98 at >= 10x exact queries/s on 1M vectors",
         "measured": f"at {big['n']:,}: recall {big['recall_at_10']}, x{big['speedup']} (1M not run)",
         "met": "not measured at 1M" + (" (met at 100k)" if big["recall_at_10"] >= 0.98 and big["speedup"] >= 10 else " (not met at 100k)")},
        {"target": "hybrid p50 <= 2 ms at SciFact size (query embedding excluded)",
         "measured": f"p50 {hyb['p50_ms']} ms, p95 {hyb['p95_ms']} ms",
         "met": "yes" if hyb["p50_ms"] <= 2 else "no"},
        {"target": "hybrid p50 <= 25 ms at 1M chunks", "measured": "not run", "met": "not measured"},
        {"target": "ingest overhead <= 10% over the raw embedder", "measured": "not run here (see benchmarks/embedders.py)",
         "met": "not measured"},
        {"target": "unchanged reindex >= 50x faster than first index",
         "measured": f"{rei['first_index_s']} s vs {rei['unchanged_reindex_s']} s (x{rei['speedup']})",
         "met": "yes" if rei["speedup"] >= 50 else "no"},
    ]


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = ["# plait performance", "",
             f"{m['date']} · {m['cpu']} · {m['cores']} cores · Python {m['python']} · numpy {m['numpy']}",
             f"BLAS: {json.dumps(m['blas'])}", "", "## Targets", "",
             "| target | measured | met |", "| --- | --- | --- |"]
    lines += [f"| {t['target']} | {t['measured']} | {t['met']} |" for t in r["targets"]]
    lex = r["lexical"]
    lines += ["", "## (a) Lexical arm, SciFact test queries, k=10, one thread", "",
              "| engine | queries/s |", "| --- | --- |",
              f"| plait (SQLite store, incremental) | {lex['plait_qps']} |",
              f"| bm25s | {lex['bm25s_qps']} |", f"| rank_bm25 (BM25Okapi) | {lex['rank_bm25_qps']} |", "",
              (f"Top-10 document overlap with bm25s: {lex['top10_doc_overlap_with_bm25s']} "
               f"({lex['docs']} docs, {lex['chunks']} chunks, {lex['queries']} queries)."), "",
              "## (b) Dense arm: exact vs HNSW (synthetic 384-d, intrinsic dim 32)", "",
              "| vectors | exact q/s | ANN q/s | speed-up | recall@10 | build s | peak RSS MB / 100k | files MB |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {d['n']:,} | {d['exact_qps']} | {d['ann_qps']} | x{d['speedup']} | {d['recall_at_10']} | "
              f"{d['ann_build_s']} | {d['peak_rss_mb_per_100k']} | {d['files_mb']} |" for d in r["dense"]]
    lines += ["", f"Skipped: {r['dense_skipped']}.", "",
              "## (c) Hybrid end to end (SQLite, SciFact, fake 384-d vectors, query embedding excluded)", "",
              (f"p50 {r['hybrid']['p50_ms']} ms, p95 {r['hybrid']['p95_ms']} ms over {r['hybrid']['queries']} "
               f"queries on {r['hybrid']['chunks']} chunks (exact dense arm: below the ANN threshold)."), "",
              "## (d) Reindex of an unchanged corpus (lexical only)", "",
              (f"First index {r['reindex']['first_index_s']} s; unchanged reindex "
               f"{r['reindex']['unchanged_reindex_s']} s (x{r['reindex']['speedup']})."), "",
              "## (e) Peak memory", "",
              ("Peak RSS growth of the dense child process (vectors in SQLite, the cached matrix, the "
               "HNSW graph) per 100k chunks: see the table in (b); the 100k row is the figure "
               "(the 10k row is dominated by fixed overhead)."), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dense-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, 10k vectors only")
    args = ap.parse_args(argv)
    if args.dense_child:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(dense_child(args.dense_child, Path(tmp))))
        return
    repeats = 2 if args.quick else 5
    started = time.perf_counter()
    report: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        print("(a)+(d) lexical and reindex…", flush=True)
        report.update(lexical(Path(tmp), repeats))
        print(f"  {report['lexical']}\n  {report['reindex']}", flush=True)
        print("(c) hybrid…", flush=True)
        report.update(hybrid(Path(tmp), max(1, repeats // 2)))
        print(f"  {report['hybrid']}", flush=True)
    print("(b)+(e) dense…", flush=True)
    report.update(dense([10_000] if args.quick else [10_000, 100_000]))
    report["targets"] = targets(report)
    report["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "performance.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "performance.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
