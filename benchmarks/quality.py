"""Retrieval quality on the BEIR datasets in ``shared/data``: every figure, one command.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/quality.py                  # the default runs
    PYTHONPATH=src .venv/bin/python benchmarks/quality.py --runs faquad-pt:e5 scifact:none

A *run* is ``DATASET:EMBEDDER`` (``none`` = lexical only). For each run this indexes the
corpus (read in place from ``--data``, default ``../shared/data``; nothing is copied)
through the embedding cache (``~/.cache/plait``, or ``--cache``), evaluates bm25,
vector, rrf, weighted, minmax, dbsf, adaptive (the default) and rrf+rerank per query slice, runs the cross-validated fusion
tuner when there is a dense arm, and analyses per query where the default hybrid lost
to a single arm. It writes, per run, ``benchmarks/results/quality-<dataset>-<embedder>``
``.json`` (everything) and ``.html`` (table + plot), and for all runs
``quality-summary.md`` and ``quality-summary.json`` (tables, targets, losses).

The default runs are ``scifact:none scifact:e5-minilm faquad-pt:e5-minilm scifact:e5
scifact:minilm faquad-pt:e5 faquad-pt:minilm``: the committed figures, the default embedder
(``e5-minilm``) first. ``e5-minilm`` is e5 and MiniLM side by side, and the cache keeps each
model's vectors under its own name, so its runs and the e5 and MiniLM runs of the same
dataset embed each passage once per model whichever comes first. Measured 2026-12-06 on the
2-core Xeon VM with other sessions' tests running (1-minute load average 2.2–9.1), at ``nice
-n 10``, with an empty cache: the seven runs took 43 minutes, 37 of them ``scifact:e5-minilm``
embedding SciFact's 9,121 chunks with both models (2,201 s, about 4 chunks/s for the pair);
then ``scifact:e5`` and ``scifact:minilm``, every vector cached, took 66 s and 77 s,
``scifact:none`` 61 s, each FaQuAD run 50–86 s. Each run's seconds are in the summary. Each
run records the commit it measured (``+dirty`` when ``src/`` or ``benchmarks/``, results
aside, differ from it) and the load average at its start and end.
Results of runs given on the command line replace only those runs' files; the summary
is rebuilt from every ``quality-*.json`` present.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.evaluation.models import EvalReport
from plait.evaluation.prepare import prepared
from plait.evaluation.report import describe, render_markdown, write_html
from plait.evaluation.runner import EvalOutcome, collect_arms, evaluate, saved_fusion
from plait.evaluation.slices import classify
from plait.evaluation.tuner import OVERFETCH, tune
from plait.types import FusionSettings, to_json

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RUNS = (
    "scifact:none", "scifact:e5-minilm", "faquad-pt:e5-minilm", "scifact:e5", "scifact:minilm",
    "faquad-pt:e5", "faquad-pt:minilm",
)
#: Published BM25 nDCG@10 on SciFact test (BEIR paper; Pyserini flat index).
#: The hybrid strategy the targets apply to: the engine's default fusion method.
DEFAULT_HYBRID = FusionSettings().method.value

SCIFACT_BM25 = {"BEIR paper (Elasticsearch)": 0.665, "Pyserini BM25 flat": 0.6789}


def _first_relevant_rank(ranking: list[str], relevant: set[str]) -> int | None:
    for position, doc in enumerate(ranking, start=1):
        if doc in relevant:
            return position
    return None


def loss_analysis(outcome: EvalOutcome, qrels: dict[str, dict[str, int]], queries: dict[str, str]) -> dict[str, Any]:
    """Per query, where the default hybrid scored below the better single arm, and why.

    For each such query: the nDCG@10 of each arm and of the default hybrid, and the rank of the
    first relevant document in each arm and in it (None: not in the top ``depth``).
    """
    scores, rankings = outcome.scores, outcome.rankings
    if not {"bm25", "vector", DEFAULT_HYBRID} <= set(scores):
        return {}
    ndcg = {name: scores[name]["ndcg@10"] for name in ("bm25", "vector", DEFAULT_HYBRID)}
    rows: list[dict[str, Any]] = []
    for qid in qrels:
        best_arm = "bm25" if ndcg["bm25"][qid] >= ndcg["vector"][qid] else "vector"
        delta = ndcg[DEFAULT_HYBRID][qid] - ndcg[best_arm][qid]
        if delta >= -1e-9:
            continue
        relevant = {d for d, g in qrels[qid].items() if g > 0}
        rows.append(
            {
                "query": qid,
                "text": queries[qid],
                "slice": classify(queries[qid]),
                "lostTo": best_arm,
                "delta": round(delta, 4),
                "ndcg": {name: round(ndcg[name][qid], 4) for name in ndcg},
                "firstRelevantRank": {
                    name: _first_relevant_rank(rankings[name][qid], relevant) for name in ndcg
                },
            }
        )
    rows.sort(key=lambda r: r["delta"])

    def other_rank(row: dict[str, Any]) -> int | None:
        other = "vector" if row["lostTo"] == "bm25" else "bm25"
        rank: int | None = row["firstRelevantRank"][other]
        return rank

    summary: dict[str, Any] = {"queries": len(qrels), "hybridBelowBestArm": len(rows)}
    for arm in ("bm25", "vector"):
        lost = [r for r in rows if r["lostTo"] == arm]
        other_ranks = [other_rank(r) for r in lost]
        found = [r for r in other_ranks if r is not None]
        summary[f"lostTo_{arm}"] = {
            "queries": len(lost),
            "ndcgLost": round(-sum(r["delta"] for r in lost), 4),
            "otherArmMissedRelevant": sum(1 for r in other_ranks if r is None),
            "otherArmMedianRank": statistics.median(found) if found else None,
            "bySlice": {s: sum(1 for r in lost if r["slice"] == s) for s in ("identifier", "natural")},
        }
    gains = [
        ndcg[DEFAULT_HYBRID][q] - max(ndcg["bm25"][q], ndcg["vector"][q]) for q in qrels
    ]
    summary["hybridAboveBestArm"] = sum(1 for g in gains if g > 1e-9)
    summary["oracleBestArmNdcg"] = round(
        sum(max(ndcg["bm25"][q], ndcg["vector"][q]) for q in qrels) / len(qrels), 4
    )
    return {"summary": summary, "worst": rows[:15]}


def run_one(dataset: str, embedder: str, *, data: Path, cache: Path | None, folds: int) -> dict[str, Any]:
    """Evaluate (and tune, with a dense arm) one dataset with one embedder."""
    started = time.perf_counter()
    load_start, commit = os.getloadavg()[0], _commit()
    print(f"[{dataset}:{embedder}] indexing at {commit}…", flush=True)
    with prepared(data / dataset, split="test", embedder=embedder, cache=cache) as ready:
        print(f"[{dataset}:{embedder}] indexed: {ready.index.chunks_added} chunks, cache {ready.cache}", flush=True)
        outcome = evaluate(
            ready.dataset,
            store=ready.store,
            collection=ready.collection,
            embedder=ready.embedder,
            index=ready.index,
            cache=ready.cache,
            reranker=_reranker,
        )
        tuned = None
        if ready.embedder is not None:
            defaults = saved_fusion(ready.store, ready.collection)
            queries = {q: ready.dataset.queries[q] for q in ready.dataset.query_ids}
            arms = collect_arms(
                ready.store, ready.collection, queries, embedder=ready.embedder, limit=max(OVERFETCH)
            )
            emb = ready.embedder
            tuned = tune(
                arms, ready.dataset.qrels, dataset=ready.dataset.name, split="test",
                embedder=f"{emb.provider}/{emb.model}", defaults=defaults, folds=folds, seed=0,
            )
        losses = loss_analysis(outcome, ready.dataset.qrels, ready.dataset.queries)
    report = outcome.report
    stem = f"quality-{dataset}-{embedder}"
    write_html(report, RESULTS / f"{stem}.html")
    payload = {
        "run": f"{dataset}:{embedder}",
        "report": to_json(report),
        "tune": to_json(tuned) if tuned else None,
        "losses": losses,
        "seconds": round(time.perf_counter() - started, 1),
        "commit": commit,
        "loadAverage": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }
    (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"[{dataset}:{embedder}] done in {payload['seconds']}s", flush=True)
    return payload


def _commit() -> str:
    """The short commit the run measures, ``+dirty`` when tracked code differs from it."""
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks", ":(exclude)benchmarks/results")
    return head + ("+dirty" if changed else "")


def _reranker() -> Any:
    """The reranker for rrf+rerank: whatever PLAIT_CROSS_ENCODER / PLAIT_LLM configure."""
    from plait.rerank import make_reranker

    return make_reranker("cross-encoder")


def _targets(payloads: list[dict[str, Any]]) -> list[str]:
    lines = []
    by_run = {p["run"]: EvalReport.model_validate(p["report"]) for p in payloads}
    for run, report in sorted(by_run.items()):
        dataset = run.split(":")[0]
        bm25 = report.metric("bm25", "ndcg@10")
        if dataset == "scifact" and bm25 is not None:
            verdict = "met" if bm25 >= SCIFACT_BM25["BEIR paper (Elasticsearch)"] else "MISSED"
            refs = ", ".join(f"{k} {v}" for k, v in SCIFACT_BM25.items())
            lines.append(f"- `{run}` BM25 nDCG@10 **{bm25:.4f}** vs published ({refs}): {verdict}.")
        if report.strategy(DEFAULT_HYBRID).available and report.strategy("vector").available:
            rrf = report.metric(DEFAULT_HYBRID, "ndcg@10") or 0.0
            arms = {a: report.metric(a, "ndcg@10") or 0.0 for a in ("bm25", "vector")}
            best = max(arms, key=lambda a: arms[a])
            margin = rrf - arms[best]
            need = 0.02 if dataset == "scifact" else 0.0
            verdict = "met" if margin >= need - 1e-12 else "MISSED"
            lines.append(
                f"- `{run}` default hybrid ({DEFAULT_HYBRID}) nDCG@10 **{rrf:.4f}** vs better arm {best} "
                f"{arms[best]:.4f}: {margin:+.4f} (target ≥ {need:+.2f}): {verdict}."
            )
    return lines


def _loss_lines(payload: dict[str, Any]) -> list[str]:
    losses = payload.get("losses") or {}
    summary = losses.get("summary")
    if not summary:
        return []
    lines = [
        (
            f"Per query, `{payload['run']}`: the default hybrid ({DEFAULT_HYBRID}) is below the better single "
            f"arm on {summary['hybridBelowBestArm']} of {summary['queries']} queries and above both on "
            f"{summary['hybridAboveBestArm']}; choosing the "
            f"better arm per query with hindsight would give nDCG@10 {summary['oracleBestArmNdcg']}."
        ),
    ]
    for arm in ("bm25", "vector"):
        s = summary[f"lostTo_{arm}"]
        other = "dense" if arm == "bm25" else "lexical"
        lines.append(
            f"- lost to {arm} on {s['queries']} queries ({s['bySlice']['identifier']} identifier, "
            f"{s['bySlice']['natural']} natural), {s['ndcgLost']:.2f} nDCG@10 in total: there the {other} arm "
            f"missed the relevant document entirely {s['otherArmMissedRelevant']} times, otherwise ranked it "
            f"{s['otherArmMedianRank']} (median), dragging it down in the fused list."
        )
    return lines


def summary(payloads: list[dict[str, Any]]) -> str:
    """quality-summary.md: targets, every run's table, tuner, per-query losses."""
    regenerate = (
        "Regenerate: `PYTHONPATH=src .venv/bin/python benchmarks/quality.py` (see the module docstring)."
    )
    lines = ["# Retrieval quality", "", regenerate, "", "## Targets", ""]
    lines += _targets(payloads) or ["- (no run yet)"]
    for payload in sorted(payloads, key=lambda p: p["run"]):
        report = EvalReport.model_validate(payload["report"])
        lines += ["", f"## `{payload['run']}`", "", render_markdown(report).rstrip()]
        machine = report.machine
        load = payload.get("loadAverage")
        measured = (
            f"Measured {report.date} at commit {payload.get('commit', 'unrecorded')} on {machine.get('cpu')} "
            f"({machine.get('cores')} cores), {payload['seconds']} s including indexing"
            + (f" (1-minute load average {load['start']} at the start, {load['end']} at the end)" if load else "")
            + f"; embedding cache {report.cache or 'not used'}."
        )
        lines += ["", measured]
        tuned = payload.get("tune")
        if tuned:
            chosen = describe(FusionSettings.model_validate(tuned["chosen"]))
            per_fold = "; ".join(
                f"{describe(FusionSettings.model_validate(f['chosen']))} ({f['chosenScore']:.4f} vs {f['defaultScore']:.4f})"
                for f in tuned["foldResults"]
            )
            lines += [
                "",
                (
                    f"Tuner ({tuned['folds']}-fold CV over queries, {tuned['candidates']} settings, "
                    f"{tuned['measure']}): held-out {tuned['heldOutScore']:.4f} vs defaults "
                    f"{tuned['defaultScore']:.4f} (gain {tuned['gain']:+.4f}); chosen on all queries: {chosen}. "
                    f"Per fold (held-out vs defaults): {per_fold}."
                ),
            ]
        loss = _loss_lines(payload)
        if loss:
            lines += ["", *loss]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="*", default=list(DEFAULT_RUNS), help="DATASET:EMBEDDER …")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache folder")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    for spec in args.runs:
        dataset, _, embedder = spec.partition(":")
        run_one(dataset, embedder or "e5", data=args.data, cache=args.cache, folds=args.folds)
    payloads = [
        json.loads(p.read_text(encoding="utf-8"))
        for p in sorted(RESULTS.glob("quality-*.json"))
        if p.name != "quality-summary.json"
    ]
    (RESULTS / "quality-summary.md").write_text(summary(payloads), encoding="utf-8")
    (RESULTS / "quality-summary.json").write_text(
        json.dumps(
            {p["run"]: {"report": p["report"], "tune": p["tune"], "losses": (p.get("losses") or {}).get("summary")}
             for p in payloads},
            indent=2, ensure_ascii=False,
        ) + "\n",
        encoding="utf-8",
    )
    print((RESULTS / "quality-summary.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
