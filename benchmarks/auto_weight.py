"""Does ``lexicalWeight: "auto"`` help? RRF with the fixed 0.5 against auto, measured.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/auto_weight.py                 # faquad-pt + identifiers, e5
    PYTHONPATH=src .venv/bin/python benchmarks/auto_weight.py --runs scifact:minilm

Each run (``DATASET:EMBEDDER``) indexes the BEIR corpus through the evaluation harness
(:func:`plait.evaluation.prepared`, embedding cache on), asks each arm once per query
(:func:`plait.evaluation.runner.collect_arms`, depth 100) and fuses with RRF (k=60,
over-fetch 100 as the harness does) under three weightings:

* ``rrf-0.5`` — the fixed default;
* ``rrf-auto`` — :func:`plait.autoweight.choose_lexical_weight` per query (0.7 for
  queries with identifier-like tokens, else 0.5);
* ``rrf-0.7`` — 0.7 for every query (is it the identifier tilt, or just more BM25?).

nDCG@10, recall@10 and MRR@10 come from ``ir-measures``, for all queries and per slice
(``identifier`` / ``natural`` by the *auto classifier*, so the natural slice of rrf-auto
is rrf-0.5 by construction). Writes ``benchmarks/results/auto_weight.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.autoweight import choose_lexical_weight
from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import (
    collect_arms,
    doc_ranking,
    fused_chunk_ids,
    machine_info,
)
from plait.types import FusionSettings

RESULTS = ROOT / "benchmarks" / "results"
DATA = {
    "faquad-pt": ROOT.parent / "shared" / "data" / "faquad-pt",
    "scifact": ROOT.parent / "shared" / "data" / "scifact",
    "identifiers": ROOT / "benchmarks" / "data" / "identifiers",
}
DEPTH = 100
STRATEGIES = ("rrf-0.5", "rrf-auto", "rrf-0.7")


def _weight(strategy: str, query: str) -> float:
    if strategy == "rrf-auto":
        return choose_lexical_weight(query).weight
    return float(strategy.split("-")[1])


def run(dataset: str, embedder: str, split: str) -> dict[str, Any]:
    started = time.perf_counter()
    with prepared(DATA[dataset], split=split, embedder=embedder) as ready:
        queries = {qid: ready.dataset.queries[qid] for qid in ready.dataset.query_ids}
        arms = collect_arms(ready.store, ready.collection, queries, embedder=ready.embedder, limit=DEPTH)
        if arms.dense is None:
            raise SystemExit(f"{dataset}:{embedder}: no dense arm ({arms.dense_reason})")
        ident = [q for q, text in queries.items() if choose_lexical_weight(text).identifiers]
        natural = [q for q in queries if q not in set(ident)]
        out: dict[str, Any] = {
            "dataset": dataset,
            "embedder": f"{ready.embedder.provider}/{ready.embedder.model}" if ready.embedder else None,
            "queries": len(queries),
            "identifierQueries": len(ident),
            "chunks": ready.index.chunks_added + ready.index.chunks_unchanged + ready.index.chunks_updated,
            "strategies": {},
        }
        for strategy in STRATEGIES:
            rankings = {}
            for qid, text in queries.items():
                settings = FusionSettings(overfetch=DEPTH, lexical_weight=_weight(strategy, text))
                ids = fused_chunk_ids(settings, arms.lexical[qid], arms.dense.get(qid, []))
                rankings[qid] = doc_ranking(ids, arms.doc_of, DEPTH)
            scores = per_query(ready.dataset.qrels, run_from_rankings(rankings))
            out["strategies"][strategy] = {
                name: {k: round(v, 4) for k, v in mean_scores(scores, ids).items()}
                for name, ids in (("all", list(queries)), ("identifier", ident), ("natural", natural))
                if ids
            }
        out["elapsedSeconds"] = round(time.perf_counter() - started, 1)
    return out


def _markdown(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Identifier-aware fusion: `lexicalWeight: \"auto\"`",
        "",
        (
            "Regenerate: `PYTHONPATH=src .venv/bin/python benchmarks/auto_weight.py` "
            "(identifier set: `benchmarks/build_identifier_set.py`)."
        ),
        "",
        (
            "RRF k=60, over-fetch 100, depth 100; `auto` = 0.7 for queries with identifier-like "
            "tokens (plait.autoweight), else 0.5. Slices by the auto classifier."
        ),
        "",
    ]
    for r in runs:
        lines += [
            f"## {r['dataset']} — {r['embedder']}",
            "",
            (
                f"{r['queries']} queries ({r['identifierQueries']} with identifier-like tokens), "
                f"{r['chunks']} chunks, {r['elapsedSeconds']} s."
            ),
            "",
            "| strategy | slice | nDCG@10 | recall@10 | MRR@10 |",
            "|---|---|---|---|---|",
        ]
        for strategy, slices in r["strategies"].items():
            for name, m in slices.items():
                lines.append(
                    f"| {strategy} | {name} | {m.get('ndcg@10', 0):.4f} | {m.get('recall@10', 0):.4f} "
                    f"| {m.get('mrr@10', 0):.4f} |"
                )
        lines.append("")
    lines += [f"Measured {meta['date']} on {meta['machine']['cpu']} ({meta['machine']['cores']} cores).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=["faquad-pt:e5", "identifiers:e5"])
    args = parser.parse_args()
    runs = []
    for spec in args.runs:
        dataset, _, embedder = spec.partition(":")
        print(f"running {dataset} with {embedder} …", flush=True)
        runs.append(run(dataset, embedder or "e5", "test"))
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine_info()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "auto_weight.json").write_text(
        json.dumps({**meta, "runs": runs}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (RESULTS / "auto_weight.md").write_text(_markdown(runs, meta), encoding="utf-8")
    print((RESULTS / "auto_weight.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
