"""The PostgreSQL lexical arm at 100k chunks, this tree against a base commit, interleaved.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/postgres_after_write_ab.py --base REF [--rounds 3]

A private PostgreSQL (``pgserver``) gets SciFact (``../shared/data/scifact``, lexical only)
copied ``--scale`` times into one collection (11: 100,331 chunks) as in
``postgres_after_write.py``. Then, ``--rounds`` times and alternating which goes first, a
fresh process per code version (``--base``'s ``src`` from ``git archive``, and this tree's)
measures two things on its own reader store (no search scope: ``lexical_search``):

* *cold*: the first pass over the first 100 SciFact test queries right after the
  reader's index is loaded (each term's postings read on its first query; the load's own
  query left out);
* *after a write*: with every query warm, 20 one-document writes by another store (the
  document's chunks deleted and inserted with their text changed), each followed by one
  query, timed; every such answer is compared with that of a store that reloads its
  index in full on every generation (``incremental_share=0``: a fresh index's answer).

Reported: per version, the median over rounds of each round's p50 and p95, the ratio
this / base, and how many after-write answers equalled the full-reload store's. Results go to
``benchmarks/results/postgres_after_write_ab.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
SCHEMA = "plait_ab"
WRITES = 20


def _queries() -> list[tuple[list[str], list[str]]]:
    from plait.retrieval.plan import lexical_terms

    test_ids = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    texts = [q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open(encoding="utf-8")) if q["_id"] in test_ids]
    return [lexical_terms(q) for q in texts[:100]]


def _pcts(values: list[float]) -> dict[str, float]:
    import numpy as np

    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def child(dsn: str, round_: int) -> dict[str, Any]:
    """One version's measures (this process imports ``plait`` from the ``src`` put first on
    ``sys.path`` by the parent)."""
    sys.path.insert(1, str(ROOT / "benchmarks"))
    from plait.stores.postgres import PostgresStore
    from postgres_after_write import _revised, _sources

    terms = _queries()
    reader = PostgresStore(dsn, schema=SCHEMA)
    writer = PostgresStore(dsn, schema=SCHEMA, vacuum_after=None)
    full = PostgresStore(dsn, schema=SCHEMA, incremental_share=0.0)
    try:
        reader.lexical_search("big", *terms[0], limit=50)  # the load (every chunk's lengths)
        cold = []
        for exact, stems in terms[1:]:
            t = time.perf_counter()
            reader.lexical_search("big", exact, stems, limit=50)
            cold.append((time.perf_counter() - t) * 1000)
        for exact, stems in terms:
            reader.lexical_search("big", exact, stems, limit=50)
        sources = _sources(writer, "big")
        after, same = [], 0
        for i in range(WRITES):
            name = sources[(7919 * (i + WRITES * round_)) % len(sources)][0]
            writer.replace_sources("big", [_revised(writer, "big", name, 1000 * round_ + i)])
            exact, stems = terms[i % len(terms)]
            t = time.perf_counter()
            got = reader.lexical_search("big", exact, stems, limit=50)
            after.append((time.perf_counter() - t) * 1000)
            same += got == full.lexical_search("big", exact, stems, limit=50)
        return {"cold": _pcts(cold), "after_write": _pcts(after), "identical": same}
    finally:
        full.close()
        writer.close()
        reader.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="git ref of the code compared against this tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=int, default=11)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_after_write_ab")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # DSN: run one version's measures, print JSON
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.round)))
        return

    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(1, str(ROOT / "benchmarks"))
    from plait.service import Plait
    from plait.stores.postgres import PostgresStore
    from plait.testing.pg import private_postgres
    from postgres_after_write import copy_collection

    def rev(ref: str) -> str:
        return subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    out: dict[str, Any] = {"base": f"{args.base} @ {rev(args.base)}", "this": f"HEAD @ {rev('HEAD')} (+ working tree)",
                           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                           "rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="plait-ab-") as tmp_name, private_postgres("plait-ab-") as dsn:
        tmp = Path(tmp_name)
        archive = subprocess.run(["git", "archive", args.base, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        (tmp / "base.tar").write_bytes(archive)
        with tarfile.open(tmp / "base.tar") as tar:
            tar.extractall(tmp / "base", filter="data")
        store = PostgresStore(dsn, schema=SCHEMA, vacuum_after=None)
        try:
            t = time.perf_counter()
            Plait(store, embedder="none").index(SCIFACT / "corpus.jsonl", collection="sf")
            out["index_s"] = round(time.perf_counter() - t, 1)
            out["load_s"] = round(copy_collection(store, "sf", "big", args.scale), 1)
            store.vacuum()
            info = store.get_collection("big")
            out["chunks"] = info.chunks if info is not None else 0
        finally:
            store.close()
        out["load_average_start"] = [round(x, 1) for x in os.getloadavg()]
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for r in range(args.rounds):
            for side in (("base", "this") if r % 2 == 0 else ("this", "base")):
                src = tmp / "base" / "src" if side == "base" else ROOT / "src"
                env = {**os.environ, "PYTHONPATH": str(src)}
                done = subprocess.run([sys.executable, __file__, "--child", dsn, "--round", str(2 * r + (side == "this"))],
                                      env=env, capture_output=True, text=True, check=True)
                runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(side, runs[side][-1], flush=True)
        out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    out["summary"] = {
        side: {
            **{m: {p: round(statistics.median(g[m][p] for g in got), 3) for p in ("p50_ms", "p95_ms")}
               for m in ("cold", "after_write")},
            "identical": f"{sum(g['identical'] for g in got)}/{WRITES * len(got)}",
        }
        for side, got in runs.items()
    }
    out["runs"] = runs
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    lines = markdown(out)
    args.out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def markdown(out: dict[str, Any]) -> list[str]:
    """The report of :func:`main`'s figures."""
    busy = max(out["load_average_start"][0], out["load_average_end"][0]) > (out["cpus"] or 1)
    lines = [f"# PostgreSQL lexical arm at {out['chunks']:,} chunks: this tree vs a base commit ({out['date']})", "",
             f"**{'Busy machine' if busy else 'Machine'}**: {out['cpus']} cores, load average "
             f"{out['load_average_start']} at the start, {out['load_average_end']} at the end. "
             f"`benchmarks/postgres_after_write_ab.py`: base {out['base']} vs this {out['this']}, {out['rounds']} "
             "rounds (a fresh process per version and round, which goes first alternating); medians of the rounds' "
             f"figures. SciFact indexed in {out['index_s']} s, copied in {out['load_s']} s.", "",
             "| measure | base p50 / p95 ms | this p50 / p95 ms | this / base (p50) |", "| --- | --- | --- | --- |"]
    summary = out["summary"]
    for m, label in (("cold", "cold: first pass, each term's postings read on its first query (99 queries)"),
                     ("after_write", f"first query after a one-document write ({WRITES} writes, no search scope)")):
        b, t = summary["base"][m], summary["this"][m]
        lines.append(f"| {label} | {b['p50_ms']} / {b['p95_ms']} | {t['p50_ms']} / {t['p95_ms']} | "
                     f"x{round(t['p50_ms'] / b['p50_ms'], 2)} |")
    return [*lines, "", "After-write answers equal to those of a store reloading its index in full on every "
            f"generation: base {summary['base']['identical']}, this {summary['this']['identical']}.", ""]


if __name__ == "__main__":
    main()
