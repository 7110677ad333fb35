"""The dense arm with and without its int8 first pass, interleaved in one process.

    PYTHONPATH=src .venv/bin/python benchmarks/dense_first_pass.py --index DB [--collection sf]

One ``Plait`` over a copy of ``--index`` (a SciFact store, e.g. fake 384-d vectors from
``benchmarks/run_all.py --only hybrid``); one warm pass over the 300 SciFact test
queries, then ``--rounds`` passes in which every query is searched twice in a row
(``Plait.search(k=10)``), once with the first pass (``plait.stores.dense_bound``) and
once with the full einsum scan, the order alternating query by query. Both variants
therefore meet the same machine, the same caches and the same neighbours' load; the
dense arm's ``DenseMatrix.rank`` and the whole search are timed (wall and CPU time,
``time.process_time``). Hits are compared between the variants for every query.
Writes ``benchmarks/results/dense_first_pass.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT.parent / "shared" / "data" / "scifact" / "queries.jsonl"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"
BUSY_LOAD = 1.5


def _digest(result: Any) -> list[Any]:
    return [[h.chunk_id, h.score, h.vector_score, h.lexical_score, h.snippet, h.highlights] for h in result.hits]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--collection", default="sf")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from plait.embeddings.fake import FakeEmbedder
    from plait.service import Plait
    from plait.stores import sqlite_snapshot

    queries = [json.loads(line)["text"] for line in QUERIES.read_text(encoding="utf-8").splitlines()][:300]
    spent: dict[str, list[float]] = defaultdict(list)
    rank = sqlite_snapshot.DenseMatrix.rank
    current = {"side": ""}

    def timed_rank(self: Any, query: Any, *, limit: int | None, allowed: Any = None) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return rank(self, query, limit=limit, allowed=allowed)
        finally:
            spent[f"{current['side']} rank wall"].append((time.perf_counter() - wall) * 1000)
            spent[f"{current['side']} rank cpu"].append((time.process_time() - cpu) * 1000)

    sqlite_snapshot.DenseMatrix.rank = timed_rank  # type: ignore[method-assign]
    loads = [os.getloadavg()[0]]
    same = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "index.db"
        shutil.copy(args.index, db)
        with Plait(str(db), embedder="none") as probe:
            info = probe.store.get_collection(args.collection)
        assert info is not None

        recorded = cast(str, info.embedder_provider)  # as recorded (None included): check_model compares it

        class Hasher(FakeEmbedder):
            provider = recorded

        embedder = Hasher(dimension=info.dimension or 384, model=info.embedder_model or "hash-384")
        with Plait(str(db), embedder=embedder) as engine:
            for q in queries:
                engine.search(q, collection=args.collection, k=10)
            dense = next(iter(engine.store._snapshots.values())).dense  # type: ignore[attr-defined]
            dense.build_first_pass()  # else built in the background after BUILD_AFTER queries
            spent.clear()
            for round_no in range(args.rounds):
                for i, q in enumerate(queries):
                    order = ("first pass", "full scan") if (i + round_no) % 2 == 0 else ("full scan", "first pass")
                    digests = {}
                    for side in order:
                        current["side"] = side
                        dense._bounded_from = sqlite_snapshot.BOUNDED_FROM if side == "first pass" else None
                        wall, cpu = time.perf_counter(), time.process_time()
                        result = engine.search(q, collection=args.collection, k=10)
                        spent[f"{side} search wall"].append((time.perf_counter() - wall) * 1000)
                        spent[f"{side} search cpu"].append((time.process_time() - cpu) * 1000)
                        digests[side] = _digest(result)
                    same += digests["first pass"] == digests["full scan"]
                    differ += digests["first pass"] != digests["full scan"]
                loads.append(os.getloadavg()[0])
    medians = {key: round(statistics.median(values), 3) for key, values in sorted(spent.items())}
    means = {key: round(statistics.mean(values), 3) for key, values in sorted(spent.items())}
    busy = max(loads) >= BUSY_LOAD
    report: dict[str, Any] = {
        "machine": {
            "cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average": [round(min(loads), 1), round(max(loads), 1)], "busy": busy,
        },
        "index": {"collection": args.collection, "queries": len(queries), "k": 10, "rounds": args.rounds},
        "median_ms": medians,
        "mean_ms": means,
        "identical_hits": f"{same}/{same + differ}",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dense_first_pass.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    label = "busy machine (other engineers' jobs running): read the ratios" if busy else "quiet machine"
    rows = []
    for what in ("rank cpu", "rank wall", "search cpu", "search wall"):
        a, b = medians[f"first pass {what}"], medians[f"full scan {what}"]
        ma, mb = means[f"first pass {what}"], means[f"full scan {what}"]
        rows.append(f"| {what} | {b} | {a} | x{b / a:.2f} | {mb} | {ma} |")
    md = [
        f"# The dense arm's int8 first pass, interleaved in one process (SciFact, collection `{args.collection}`)",
        "",
        f"{report['machine']['date']} · {platform.machine()} · {os.cpu_count()} cores · Python "
        f"{platform.python_version()} · load average {min(loads):.1f}–{max(loads):.1f} — {label}",
        "",
        "| ms per search | full scan median | first pass median | ratio | full scan mean | first pass mean |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"`Plait.search(k=10)` over the 300 SciFact test queries, {args.rounds} rounds after one warm pass; each "
        "query searched twice in a row, with and without the first pass (order alternating), so both meet the "
        "same machine and caches. `rank` is `DenseMatrix.rank` (the dense arm's scan, inside the search). "
        f"Hits identical (ids, scores, snippets, highlights) in {report['identical_hits']} pairs.",
        "",
    ]
    (RESULTS / "dense_first_pass.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
