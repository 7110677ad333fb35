"""Snippet building per search: the word-by-word matcher against the cached, pre-filtered one.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/snippet_speed.py        # ~1 min on 2 cores

Every hit of ``Plait.search`` gets a snippet around its best passage (``plait.snippets``).
Until 2026-12-01 each word of each hit's text was analysed on its own, every time; the
matcher now analyses a distinct word once (an LRU cache shared by all searches), skips
words sharing no term with the query before comparing them to each query word, and
analyses the query once per result instead of once per hit. This benchmark indexes the
first ``--docs`` SciFact abstracts (lexical only: snippets do not depend on the dense
arm), takes the top 10 hits of the test queries, and builds their snippets both ways,
interleaved query by query so a busy machine slows both alike. It checks that both give
identical snippets and highlights and writes the medians per search to
``benchmarks/results/snippet_speed.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "scifact"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"


def word_by_word(text: str, words: list[frozenset[str]]) -> list[tuple[int, int, frozenset[int]]]:
    """The matcher as it was: every word analysed on its own, every time."""
    from plait.analysis import analyse
    from plait.snippets import _WORD

    found = []
    for match in _WORD.finditer(text):
        fields = analyse(match.group())
        mine = set(fields.exact) | set(fields.stems)
        hit = frozenset(i for i, terms in enumerate(words) if terms & mine)
        if hit:
            found.append((match.start(), match.end(), hit))
    return found


def before(result: Any) -> list[tuple[str, list[list[int]]]]:
    """Snippets as built before: the query analysed per hit, the word-by-word matcher."""
    from plait import snippets

    cached = snippets._matches
    snippets._matches = word_by_word
    try:
        return [snippets.snippet(snippets.visible_text(h), result.query) for h in result.hits]
    finally:
        snippets._matches = cached


def after(result: Any) -> list[tuple[str, list[list[int]]]]:
    from plait.snippets import with_snippets

    return [(h.snippet or "", h.highlights or []) for h in with_snippets(result).hits]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()

    from plait.service import Plait

    with (DATA / "corpus.jsonl").open(encoding="utf-8") as f:
        docs = list(islice(f, args.docs))
    with (DATA / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in islice(f, args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(docs), encoding="utf-8")
        with Plait(str(Path(tmp) / "s.db"), embedder="none") as p:
            p.index(corpus, collection="s")
            results = [p.search(q, collection="s", k=10) for q in queries]
    load = [round(x, 1) for x in os.getloadavg()]
    old_ms: list[float] = []
    new_ms: list[float] = []
    identical = 0
    for result in results:
        t = time.perf_counter()
        old = before(result)
        old_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        new = after(result)
        new_ms.append((time.perf_counter() - t) * 1000)
        identical += old == new
    report: dict[str, Any] = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "load_average_start": load,
                    "date": datetime.now(UTC).isoformat(timespec="seconds")},
        "docs": len(docs), "searches": len(results), "hits_per_search": 10,
        "before_p50_ms": round(statistics.median(old_ms), 3),
        "after_p50_ms": round(statistics.median(new_ms), 3),
        "speedup_p50": round(statistics.median(old_ms) / statistics.median(new_ms), 2),
        "identical_searches": identical,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "snippet_speed.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    busy = " (busy machine: other jobs running; read the ratio)" if load[0] > (os.cpu_count() or 1) else ""
    md = [
        "# Snippet building per search (10 hits)", "",
        f"{report['machine']['date']} · {report['machine']['cpu']} · {report['machine']['cores']} cores · "
        f"Python {report['machine']['python']} · load average {load}{busy}", "",
        f"SciFact, first {len(docs)} abstracts, {len(results)} test queries, top 10 hits each; both matchers "
        "on the same hits, interleaved.", "",
        "| matcher | p50 ms per search |", "| --- | --- |",
        f"| word by word (before) | {report['before_p50_ms']} |",
        f"| cached, pre-filtered, query analysed once (now) | {report['after_p50_ms']} |", "",
        f"Speed-up x{report['speedup_p50']}; identical snippets and highlights in {identical}/{len(results)} searches.",
    ]
    (RESULTS / "snippet_speed.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md))
    if identical != len(results):
        sys.exit(1)


if __name__ == "__main__":
    main()
