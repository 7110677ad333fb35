"""HNSW build settings: build time against recall@10 and queries/s, straight on hnswlib.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=src .venv/bin/python \\
        benchmarks/hnsw_build.py --n 100000 --configs 16,200 16,64 24,48 12,48 8,40 16,32
    ... --n 1000000 --configs 16,64 --efs 256,384,512      # the 1M figure (~10-15 min)

The vectors are run_all.py's ``synthetic()`` (384-d, intrinsic dimension 32); the
graph is built the way ``plait.stores.ann.AnnIndex`` builds it (inner product,
``add_items`` on all cores, seed 100). Exact queries/s is the same matrix product the
store's exact path does (``matrix @ q`` then the top 10), one query at a time. Results
are appended, one JSON object per line, to benchmarks/results/hnsw_build.jsonl and
summarised in hnsw_build.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_all import DIM, RESULTS, synthetic


def exact_top10(data: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, float]:
    """Ground truth and exact queries/s (one query at a time, as the store answers)."""
    out = np.empty((len(queries), 10), dtype=np.int64)
    t = time.perf_counter()
    for i, q in enumerate(queries):
        scores = data @ q
        top = np.argpartition(-scores, 10)[:10]
        out[i] = top[np.argsort(-scores[top])]
    return out, len(queries) / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> None:
    import hnswlib  # type: ignore[import-untyped]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--configs", nargs="+", default=["16,64"], help="M,ef_construction pairs")
    ap.add_argument("--efs", default="256,384", help="ef_search values to query with")
    args = ap.parse_args(argv)
    data, queries = synthetic(args.n, 200)
    truth, exact_qps = exact_top10(data, queries)
    rows = []
    for config in args.configs:
        m, efc = (int(x) for x in config.split(","))
        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=args.n, ef_construction=efc, M=m, random_seed=100)
        t = time.perf_counter()
        index.add_items(data, np.arange(args.n))
        build_s = time.perf_counter() - t
        for ef in (int(x) for x in args.efs.split(",")):
            index.set_ef(ef)
            t = time.perf_counter()
            got = [index.knn_query(q.reshape(1, -1), k=10, num_threads=1)[0][0] for q in queries]
            qps = len(queries) / (time.perf_counter() - t)
            recall = float(np.mean([len(set(g) & set(r)) / 10 for g, r in zip(got, truth, strict=True)]))
            rows.append({
                "date": datetime.now(UTC).isoformat(timespec="seconds"), "n": args.n, "M": m,
                "ef_construction": efc, "ef_search": ef, "build_threads": os.cpu_count(),
                "build_s": round(build_s, 1), "recall_at_10": round(recall, 4), "ann_qps": round(qps, 1),
                "exact_qps": round(exact_qps, 1), "speedup": round(qps / exact_qps, 1),
                "load_1min": round(os.getloadavg()[0], 1),
            })
            print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = RESULTS / "hnsw_build.jsonl"
    with log.open("a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    every = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = ["# HNSW build settings (hnswlib, synthetic 384-d, intrinsic dim 32, 2 cores)", "",
             ("Written by `benchmarks/hnsw_build.py`; the machine was shared (1-min load average "
              "in the last column; empty: not recorded), so build seconds are noisy; recall is not."), "",
             "| vectors | M | ef_construction | ef_search | build s | recall@10 | ANN q/s | exact q/s | speed-up | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['n']:,} | {r['M']} | {r['ef_construction']} | {r['ef_search']} | {r['build_s']} | "
              f"{r['recall_at_10']} | {r['ann_qps']} | {r['exact_qps']} | x{r['speedup']} | {r['load_1min']} |"
              for r in every]
    (RESULTS / "hnsw_build.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
