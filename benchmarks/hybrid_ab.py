"""Hybrid search latency of two source trees, side by side in one run (A/B).

    git worktree add --detach /tmp/plait-before <REV>
    PYTHONPATH=src .venv/bin/python benchmarks/hybrid_ab.py --before /tmp/plait-before --index DB

``--index`` is a SQLite store holding SciFact in collection ``sf`` indexed with the fake
384-d embedder (``hash-384``; e.g. written by ``benchmarks/run_all.py --only hybrid`` or by
``Plait(db, embedder=FakeEmbedder(dimension=384, model="hash-384")).index(corpus)``). Each
tree gets its own copy of it (a newer tree may migrate the file). Rounds alternate
before / after in fresh subprocesses, so a busy machine slows both alike; each round
warms up on the 300 SciFact test queries, then times ``Plait.search(k=10)`` on each of
them once (query embedding: the fake hasher, about 0.1 ms). The medians go to
``benchmarks/results/hybrid_ab.{json,md}`` with the load average of every round.
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

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT.parent / "shared" / "data" / "scifact" / "queries.jsonl"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"

CHILD = r"""
import json, statistics, sys, time
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
queries = [json.loads(line)["text"] for line in open(sys.argv[2], encoding="utf-8")][:300]
with Plait(sys.argv[1], embedder=FakeEmbedder(dimension=384, model="hash-384")) as p:
    for q in queries:
        p.search(q, collection="sf", k=10)
    lat = []
    for q in queries:
        t = time.perf_counter()
        p.search(q, collection="sf", k=10)
        lat.append((time.perf_counter() - t) * 1000)
print(json.dumps({"p50": statistics.median(lat), "p95": sorted(lat)[int(0.95 * len(lat))]}))
"""


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return out.stdout.strip()[:90]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--before", type=Path, required=True, help="the other source tree (a git worktree)")
    ap.add_argument("--after", type=Path, default=ROOT, help="this tree by default")
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for side in trees:
            stores[side] = Path(tmp) / f"{side}.db"
            shutil.copyfile(args.index, stores[side])
        for n in range(args.rounds):
            for side, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
                out = subprocess.run([sys.executable, "-c", CHILD, str(stores[side]), str(QUERIES)],
                                     capture_output=True, text=True, env=env, check=True)
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                rounds.append({"round": n + 1, "side": side, "load": round(os.getloadavg()[0], 1),
                               "p50_ms": round(figures["p50"], 3), "p95_ms": round(figures["p95"], 3)})
                print(rounds[-1], flush=True)
    medians = {side: statistics.median(float(r["p50_ms"]) for r in rounds if r["side"] == side)  # type: ignore[arg-type]
               for side in trees}
    report = {
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "date": datetime.now(UTC).isoformat(timespec="seconds")},
        "trees": {side: _commit(tree) for side, tree in trees.items()},
        "rounds": rounds,
        "median_p50_ms": {side: round(v, 3) for side, v in medians.items()},
        "speedup": round(medians["before"] / medians["after"], 2),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hybrid_ab.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    loads = [float(r["load"]) for r in rounds]  # type: ignore[arg-type]
    busy = " — busy machine: read the ratio" if max(loads) > (os.cpu_count() or 1) else ""
    lines = [
        "# Hybrid search latency, two trees side by side (SciFact, 9,121 chunks, fake 384-d vectors)", "",
        f"{report['machine']['date']} · {report['machine']['cpu']} · {report['machine']['cores']} cores · "
        f"Python {report['machine']['python']} · load average {min(loads)}–{max(loads)} during the rounds{busy}", "",
        f"- before: `{report['trees']['before']}`",
        f"- after: `{report['trees']['after']}`", "",
        "| round | side | load | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |",
        *[f"| {r['round']} | {r['side']} | {r['load']} | {r['p50_ms']} | {r['p95_ms']} |" for r in rounds], "",
        f"Median p50: before {report['median_p50_ms']['before']} ms, after {report['median_p50_ms']['after']} ms "
        f"(x{report['speedup']}). `Plait.search(k=10)`, 300 SciFact test queries after one warm pass, "
        "query embedding by the fake hasher (included: about 0.1 ms).",
    ]
    (RESULTS / "hybrid_ab.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
