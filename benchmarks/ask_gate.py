"""Where should ask's dense relevance gate sit? Top-1 cosine of answerable vs
unanswerable questions over examples/docs, per embedder, and which gate outcome each gets.

    PYTHONPATH=src .venv/bin/python benchmarks/ask_gate.py --embedder e5 --store /tmp/gate/plait.db

Writes benchmarks/results/ask_gate_<embedder>.json. Indexing the examples with e5 on two
cores takes about two minutes; an existing store is reused.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from plait.ask import AskSettings
from plait.service import Plait

ROOT = Path(__file__).resolve().parents[1]

ANSWERABLE = [
    "How do I rotate an API key?",
    "How long do I have to refund a PIX payment?",
    "What does ERR-4012 mean?",
    "Why do card payments get declined?",
    "What are the API rate limits?",
    "How do I cancel a subscription?",
    "How do I respond to a chargeback?",
    "How does database routing per tenant work?",
    "What to do when the inventory shows stale stock?",
    "Why are webhooks delayed or duplicated?",
    "Como faço o estorno de um PIX?",
    "What changed in release v3.11.2?",
    "How do I verify a webhook signature?",
    "Why did my payout fail?",
]
UNANSWERABLE = [
    "What is the capital of France?",
    "zebra migration patterns in Africa",
    "recipe for chocolate cake",
    "who won the 1998 world cup",
    "how do I change a bicycle tyre",
    "best hiking trails in Patagonia",
    "Qual é a receita de pão de queijo?",
    "how tall is Mount Everest",
    "symptoms of the common cold",
    "how to train a puppy to sit",
    "what is the plot of Hamlet",
    "how to tune a guitar",
]


def top_cosine(engine: Plait, question: str) -> float | None:
    hits = engine.search(question, collection="examples", k=5).hits
    scores = [h.vector_score for h in hits if h.vector_score is not None]
    return round(max(scores), 4) if scores else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--store", default="/tmp/plait-gate/plait.db")
    args = parser.parse_args()
    with Plait(args.store, embedder=args.embedder, llm="none") as engine:
        if engine.store.get_collection("examples") is None:
            engine.index(ROOT / "examples" / "docs", collection="examples")
        rows = []
        for kind, questions in (("answerable", ANSWERABLE), ("unanswerable", UNANSWERABLE)):
            for q in questions:
                result = engine.ask(q, collection="examples")
                rows.append(
                    {"kind": kind, "question": q, "topCosine": top_cosine(engine, q),
                     "mode": result.mode, "sources": len(result.sources)}
                )
    figures = {}
    for kind in ("answerable", "unanswerable"):
        values = [r["topCosine"] for r in rows if r["kind"] == kind and r["topCosine"] is not None]
        answered = sum(r["mode"] != "not-found" for r in rows if r["kind"] == kind)
        figures[kind] = {
            "n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values),
            "answeredWithDefaultGate": answered,
        }
    out = {"embedder": args.embedder, "defaultGate": AskSettings().model_dump(), "figures": figures, "rows": rows}
    path = ROOT / "benchmarks" / "results" / f"ask_gate_{args.embedder}.json"
    path.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
