"""Where a hybrid search's CPU time goes, stage by stage, for one or two source trees.

    PYTHONPATH=src .venv/bin/python benchmarks/search_stages.py --index DB --collection eval-scifact \
        [--before /tmp/plait-before]

Each tree runs in its own subprocess on its own copy of ``--index`` (as
``benchmarks/hybrid_ab.py``): one warm pass over the 300 SciFact test queries, then one
timed pass, ``Plait.search(k=10)``, query vectors by the fake hasher under the
collection's provider and model. Each stage's function is wrapped and its CPU time
(``time.process_time``: the process's, every thread's — a busy machine's waits for a
core left out) summed over the pass; stages nest (``run`` holds the arms, fusion and
hydration), so the rows do not add up to the total. Writes
``benchmarks/results/search_stages.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT.parent / "shared" / "data" / "scifact" / "queries.jsonl"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"

CHILD = r"""
import json, sys, time
from collections import defaultdict
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
import plait.retrieval.pipeline as pipeline
import plait.retrieval.plan as plan
import plait.search as search
import plait.service_querying as querying
db, path, collection = sys.argv[1], sys.argv[2], sys.argv[3]
queries = [json.loads(line)["text"] for line in open(path, encoding="utf-8")][:300]
with Plait(db, embedder="none") as probe:
    info = probe.store.get_collection(collection)

class Hasher(FakeEmbedder):
    provider = info.embedder_provider

spent = defaultdict(float)
def wrap(owner, name, label):
    inner = getattr(owner, name)
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - start
    setattr(owner, name, timed)

with Plait(db, embedder=Hasher(dimension=info.dimension, model=info.embedder_model)) as p:
    for q in queries:
        p.search(q, collection=collection, k=10)
    STAGES = [
        (p.store, "get_collection", "store.get_collection (collection read)"),
        (p.store, "get_settings", "store.get_settings (collection settings)"),
        (p.store, "collection_with_settings", "store.collection_with_settings (both in one statement)"),
        (search, "plan_query", "plan_query (analysis, settings, query vector)"),
        (plan, "embed_query", "  embed_query (the guard, the query vector)"),
        (search, "run", "run (arms, fusion, hydration, hits)"),
        (p.store, "lexical_search", "  lexical arm"),
        (p.store, "vector_search", "  dense arm (exact, 9k x 384)"),
        (pipeline, "fuse", "  fusion"),
        (p.store, "get_chunks", "  chunk rows of the page"),
        (pipeline, "hits_for", "  Hit models"),
        (search, "result_of", "result_of (the response model)"),
        (querying, "with_snippets", "snippets and highlights"),
    ]
    for owner, name, label in STAGES:
        if hasattr(owner, name):  # a tree's store may not have every read
            wrap(owner, name, label)
    start = time.process_time()
    for q in queries:
        p.search(q, collection=collection, k=10)
    total = time.process_time() - start
order = [label for _, _, label in STAGES]
print(json.dumps({"total_ms": total / len(queries) * 1000,
                  "stages_ms": {k: spent[k] / len(queries) * 1000 for k in order}}))
"""


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return out.stdout.strip()[:90]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--collection", default="sf")
    ap.add_argument("--before", type=Path, default=None, help="another source tree to compare (a git worktree)")
    ap.add_argument("--after", type=Path, default=ROOT, help="this tree by default")
    args = ap.parse_args()
    trees = {"after": args.after.resolve()} if args.before is None else {
        "before": args.before.resolve(), "after": args.after.resolve()}
    figures: dict[str, Any] = {}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for side, tree in trees.items():
            store = Path(tmp) / f"{side}.db"
            shutil.copyfile(args.index, store)
            env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
            loads.append(os.getloadavg()[0])
            out = subprocess.run([sys.executable, "-c", CHILD, str(store), str(QUERIES), args.collection],
                                 capture_output=True, text=True, env=env, check=True)
            figures[side] = json.loads(out.stdout.strip().splitlines()[-1])
            loads.append(os.getloadavg()[0])
            print(side, figures[side], flush=True)
    report = {
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "load_average": [round(min(loads), 1), round(max(loads), 1)]},
        "collection": args.collection, "queries": 300, "k": 10,
        "trees": {side: _commit(tree) for side, tree in trees.items()},
        "cpu_ms_per_search": figures,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "search_stages.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    text = render(report)
    (RESULTS / "search_stages.md").write_text(text, encoding="utf-8")
    print(text)


#: The stages in the order they are listed (the child's wrap order; ↳: inside the one above).
ORDER = [
    "store.get_collection (collection read)",
    "store.get_settings (collection settings)",
    "store.collection_with_settings (both in one statement)",
    "plan_query (analysis, settings, query vector)",
    "  embed_query (the guard, the query vector)",
    "run (arms, fusion, hydration, hits)",
    "  lexical arm",
    "  dense arm (exact, 9k x 384)",
    "  fusion",
    "  chunk rows of the page",
    "  Hit models",
    "result_of (the response model)",
    "snippets and highlights",
]


def render(report: dict[str, Any]) -> str:
    """The Markdown table of a report :func:`main` wrote."""
    figures, machine = report["cpu_ms_per_search"], report["machine"]
    sides = list(figures)
    low, high = machine["load_average"]
    busy = " — busy machine (other engineers' jobs running)" if high >= 1.5 else ""
    lines = [
        f"# CPU time per hybrid search, stage by stage (SciFact, collection `{report['collection']}`)", "",
        f"{machine['date']} · {machine['cpu']} · {machine['cores']} cores · "
        f"Python {machine['python']} · load average {low}–{high}{busy}", "",
        *[f"- {side}: `{report['trees'][side]}`" for side in sides], "",
        "| stage | " + " | ".join(f"{side} ms" for side in sides) + " |",
        "| --- | " + " | ".join("---" for _ in sides) + " |",
        "| **whole search** | " + " | ".join(f"{figures[s]['total_ms']:.3f}" for s in sides) + " |",
        *["| " + label.replace("  ", "↳ ") + " | "
          + " | ".join(f"{figures[s]['stages_ms'].get(label, 0.0):.3f}" for s in sides) + " |" for label in ORDER], "",
        "Mean CPU time (`time.process_time`) per `Plait.search(k=10)` over 300 SciFact test queries after one "
        "warm pass; each stage's function wrapped (↳: inside the stage above; the wrappers' own cost is in the "
        "whole search). CPU time leaves out a busy machine's waits for a core, not its contention for caches.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
