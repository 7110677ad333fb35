"""Hybrid search latency of two source trees, side by side in one run (A/B).

    git worktree add --detach /tmp/plait-before <REV>
    PYTHONPATH=src .venv/bin/python benchmarks/hybrid_ab.py --before /tmp/plait-before --index DB [--collection sf]

``--index`` is a SQLite store holding SciFact in ``--collection`` (default ``sf``), e.g.
written by ``benchmarks/run_all.py --only hybrid`` (fake 384-d ``hash-384`` vectors) or
the fusion table's cached SciFact store (MiniLM vectors, collection ``eval-scifact``).
The query vectors are the fake hasher's under the collection's recorded provider and
model (latency only: the dense ranking is not the real model's). Each tree gets its own
copy of the store (a newer tree may migrate the file). Rounds alternate before / after
in fresh subprocesses, so a busy machine slows both alike; each round warms up on the
300 SciFact test queries, then times ``Plait.search(k=10)`` on each of them once (query
embedding: the fake hasher's query cache, warm after the first pass). A tree that keeps
hit texts split for snippets (``plait.snippets._hit_words``) is also timed with that
cache emptied before every search (``p50 cold texts``: every hit's text seen for the
first time). Wall and CPU time (``time.process_time``: the process's, every thread's)
are both timed per search: on a busy machine the CPU time leaves out the waits for a
core. Every round's hits (ids, scores, ranks, badges, snippets, highlights) are
compared between the trees. The medians go to ``benchmarks/results/hybrid_ab.{json,md}``
with the load average of every round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT.parent / "shared" / "data" / "scifact" / "queries.jsonl"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"
#: A load average at or above this on the 2-core machine: figures labelled "busy machine".
BUSY_LOAD = 1.5

CHILD = r"""
import hashlib, json, statistics, sys, time
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
import plait.snippets as snippets
db, path, collection = sys.argv[1], sys.argv[2], sys.argv[3]
queries = [json.loads(line)["text"] for line in open(path, encoding="utf-8")][:300]
with Plait(db, embedder="none") as probe:
    info = probe.store.get_collection(collection)

class Hasher(FakeEmbedder):
    provider = info.embedder_provider

def digest(result):
    hits = [[h.chunk_id, h.score, h.vector_score, h.lexical_score, h.match.value, h.ranks.model_dump(),
             h.snippet, h.highlights, h.score_normalised] for h in result.hits]
    return hashlib.sha256(json.dumps(hits).encode()).hexdigest()

with Plait(db, embedder=Hasher(dimension=info.dimension, model=info.embedder_model)) as p:
    for q in queries:
        p.search(q, collection=collection, k=10)
    lat, cpu, digests = [], [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        r = p.search(q, collection=collection, k=10)
        lat.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        digests.append(digest(r))
    cold = []
    clear = getattr(getattr(snippets, "_hit_words", None), "cache_clear", None)
    if clear is not None:
        for q in queries:
            clear()
            t = time.perf_counter()
            p.search(q, collection=collection, k=10)
            cold.append((time.perf_counter() - t) * 1000)
out = {"p50": statistics.median(lat), "p95": sorted(lat)[int(0.95 * len(lat))], "cpu_p50": statistics.median(cpu),
       "digests": digests}
if cold:
    out["p50_cold"] = statistics.median(cold)
print(json.dumps(out))
"""


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return out.stdout.strip()[:90]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--before", type=Path, required=True, help="the other source tree (a git worktree)")
    ap.add_argument("--after", type=Path, default=ROOT, help="this tree by default")
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--collection", default="sf")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rounds: list[dict[str, Any]] = []
    digests: dict[str, list[list[str]]] = {side: [] for side in trees}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for side in trees:
            stores[side] = Path(tmp) / f"{side}.db"
            shutil.copyfile(args.index, stores[side])
        for n in range(args.rounds):
            for side, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
                load = os.getloadavg()[0]
                out = subprocess.run([sys.executable, "-c", CHILD, str(stores[side]), str(QUERIES), args.collection],
                                     capture_output=True, text=True, env=env, check=True)
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                digests[side].append(figures["digests"])
                row = {"round": n + 1, "side": side, "load": round(max(load, os.getloadavg()[0]), 1),
                       "p50_ms": round(figures["p50"], 3), "p95_ms": round(figures["p95"], 3),
                       "cpu_p50_ms": round(figures["cpu_p50"], 3)}
                if "p50_cold" in figures:
                    row["p50_cold_texts_ms"] = round(figures["p50_cold"], 3)
                rounds.append(row)
                print(rounds[-1], flush=True)
    medians = {side: statistics.median(float(r["p50_ms"]) for r in rounds if r["side"] == side) for side in trees}
    cpu = {side: statistics.median(float(r["cpu_p50_ms"]) for r in rounds if r["side"] == side) for side in trees}
    cold = [float(r["p50_cold_texts_ms"]) for r in rounds if r["side"] == "after" and "p50_cold_texts_ms" in r]
    same = sum(a == b for a, b in zip(digests["before"][-1], digests["after"][-1], strict=True))
    loads = [float(r["load"]) for r in rounds]
    report: dict[str, Any] = {
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "load_average": [min(loads), max(loads)], "busy": max(loads) >= BUSY_LOAD},
        "index": {"collection": args.collection, "queries": 300, "k": 10},
        "trees": {side: _commit(tree) for side, tree in trees.items()},
        "rounds": rounds,
        "median_p50_ms": {side: round(v, 3) for side, v in medians.items()},
        "speedup": round(medians["before"] / medians["after"], 2),
        "median_cpu_p50_ms": {side: round(v, 3) for side, v in cpu.items()},
        "cpu_speedup": round(cpu["before"] / cpu["after"], 2),
        "identical_hits": f"{same}/{len(digests['after'][-1])}",
    }
    if cold:
        report["median_p50_cold_texts_ms"] = round(statistics.median(cold), 3)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hybrid_ab.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    busy = " — busy machine (other engineers' jobs running): read the ratio" if report["machine"]["busy"] else ""
    cold_line = (
        f" With the hit-text cache emptied before every search (every hit's text split for the first time): "
        f"after {report['median_p50_cold_texts_ms']} ms p50."
        if cold else ""
    )
    has_cold = any("p50_cold_texts_ms" in r for r in rounds)
    head = "| round | side | load | p50 ms | p95 ms | CPU p50 ms |" + (" p50 cold texts ms |" if has_cold else "")
    rule = "| --- | --- | --- | --- | --- | --- |" + (" --- |" if has_cold else "")
    lines = [
        f"# Hybrid search latency, two trees side by side (SciFact, collection `{args.collection}`)", "",
        f"{report['machine']['date']} · {report['machine']['cpu']} · {report['machine']['cores']} cores · "
        f"Python {report['machine']['python']} · load average {min(loads)}–{max(loads)} during the rounds{busy}", "",
        f"- before: `{report['trees']['before']}`",
        f"- after: `{report['trees']['after']}`", "",
        head, rule,
        *[f"| {r['round']} | {r['side']} | {r['load']} | {r['p50_ms']} | {r['p95_ms']} | {r['cpu_p50_ms']} |"
          + (f" {r.get('p50_cold_texts_ms', '')} |" if has_cold else "") for r in rounds], "",
        f"Median p50: before {report['median_p50_ms']['before']} ms, after {report['median_p50_ms']['after']} ms "
        f"(x{report['speedup']}); CPU time per search (the process's, every thread's: a busy machine's waits "
        f"left out) p50 before {report['median_cpu_p50_ms']['before']} ms, after "
        f"{report['median_cpu_p50_ms']['after']} ms (x{report['cpu_speedup']}). "
        "`Plait.search(k=10)`, 300 SciFact test queries after one warm pass, "
        "query vectors by the fake hasher under the collection's provider and model (its query cache: "
        f"warm).{cold_line} Hits identical between the trees (ids, scores, ranks, badges, snippets, "
        f"highlights) in {report['identical_hits']} searches of the last round.",
    ]
    (RESULTS / "hybrid_ab.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
