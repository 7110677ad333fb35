"""Round trips of ``Plait.search`` on PostgreSQL: one code version against another, side
by side in one run (issue 26).

One private PostgreSQL (``pgserver``) and one SQLite file hold the same corpus (SciFact,
optionally its first ``--docs`` documents; fake 384-d vectors: latency only), indexed by
this tree's code. Two worker processes, one per code version (``--base``: a git ref whose
``src`` is extracted to a temporary folder, default ``main``; the other is this tree), open
both stores; the parent sends them the queries interleaved (base PG, this PG, base SQLite,
this SQLite, query by query), each after one warm pass, and compares their hits.
Query vectors are computed before timing and declared held (``cached_query``), so the
query guard's thread is not timed. Each worker also counts the round trips of one warm
PostgreSQL search (a statement outside a pipeline, or a pipeline, is one).

    python benchmarks/postgres_trips.py [--docs N] [--base REF] [--passes N]
    python benchmarks/postgres_trips.py --dsn DSN --schema S --lite FILE   # an indexed pair, kept

With ``--dsn``/``--schema``/``--lite`` the collection ``sf`` already indexed in both (by
this script or by hand) is searched as it is: no server started, nothing indexed. The
statement a search may send ahead with libpq itself (:mod:`plait.stores.postgres_ahead`)
counts as a round trip too.

Writes ``benchmarks/results/postgres_trips.{json,md}``. Wall-clock milliseconds on
whatever machine runs it: on a shared machine read the ratios (labelled with the load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"  # ../shared/data beside the repository
RESULTS = ROOT / "benchmarks" / "results"
DIM = 384
SCHEMA = "plait_trips"


def _queries() -> list[str]:
    test_ids = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    queries = {q["_id"]: q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open(encoding="utf-8"))}
    return [queries[q] for q in sorted(test_ids) if q in queries]


def _count_trips(engine: Any, text: str) -> int:
    """Round trips of one search: a statement outside a pipeline, or a pipeline, is one."""
    import psycopg

    trips = [0]
    execute, pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
    import importlib

    try:
        ahead: Any = importlib.import_module("plait.stores.postgres_ahead")
    except ImportError:  # code before the statement sent ahead
        ahead = None
    send = None if ahead is None else ahead.send

    def counted_send(*a: Any, **k: Any) -> Any:
        trips[0] += 1
        assert send is not None
        return send(*a, **k)

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        trips[0] += self._pipeline is None
        return execute(self, *a, **k)

    def counted_pipeline(self: Any) -> Any:
        trips[0] += self._pipeline is None
        return pipeline(self)

    psycopg.Connection.execute = counted  # type: ignore[method-assign]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign]
    if ahead is not None:
        ahead.send = counted_send
    try:
        engine.search(text, collection="sf", k=10)
    finally:
        psycopg.Connection.execute, psycopg.Connection.pipeline = execute, pipeline  # type: ignore[method-assign]
        if ahead is not None:
            ahead.send = send
    return trips[0]


def worker(dsn: str, lite: str, texts: list[str], schema: str = SCHEMA) -> None:
    """Serve ``pg i`` / ``lite i`` / ``trips`` lines on stdin, one JSON line back each."""
    from plait.embeddings.fake import FakeEmbedder
    from plait.service import Plait
    from plait.stores.postgres import PostgresStore

    hasher = FakeEmbedder(dimension=DIM, model="hash-384")
    vectors = {q: hasher.embed_query(q) for q in texts}

    class Precomputed(FakeEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            hit = vectors.get(text)
            return FakeEmbedder.embed_query(self, text) if hit is None else hit

        def cached_query(self, text: str) -> np.ndarray | None:
            return vectors.get(text)

    engines = {
        "pg": Plait(PostgresStore(dsn, schema=schema, vacuum_after=None), embedder=Precomputed(dimension=DIM, model="hash-384")),
        "lite": Plait(lite, embedder=Precomputed(dimension=DIM, model="hash-384")),
    }
    for engine in engines.values():
        for q in texts:
            engine.search(q, collection="sf", k=10)
    for line in sys.stdin:
        kind, _, arg = line.strip().partition(" ")
        if kind == "trips":
            print(json.dumps({"trips": _count_trips(engines["pg"], texts[0])}), flush=True)
            continue
        q = texts[int(arg)]
        t = time.perf_counter()
        result = engines[kind].search(q, collection="sf", k=10)
        ms = (time.perf_counter() - t) * 1000
        print(json.dumps({"ms": ms, "hits": [h.chunk_id for h in result.hits]}), flush=True)
    for engine in engines.values():
        engine.close()


def _pcts(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=0, help="index only the first N SciFact documents (0: all)")
    ap.add_argument("--base", default="main", help="git ref of the code compared against this tree")
    ap.add_argument("--passes", type=int, default=1, help="timed passes over the queries")
    ap.add_argument("--dsn", help="a server holding collection sf indexed in --schema (kept; nothing indexed)")
    ap.add_argument("--schema", default=SCHEMA)
    ap.add_argument("--lite", help="with --dsn: the SQLite file holding collection sf")
    args = ap.parse_args()
    if bool(args.dsn) != bool(args.lite):
        ap.error("--dsn and --lite go together")
    sys.path.insert(0, str(ROOT / "src"))
    from plait.embeddings.fake import FakeEmbedder
    from plait.service import Plait
    from plait.stores.postgres import PostgresStore
    from plait.testing.pg import private_postgres

    texts = _queries()
    base_rev = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    this_rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    out: dict[str, Any] = {"base": f"{args.base} @ {base_rev}", "this": f"HEAD @ {this_rev} (+ working tree)",
                           "queries": len(texts), "k": 10, "cpus": os.cpu_count(),
                           "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    server = nullcontext(args.dsn) if args.dsn else private_postgres("plait-trips-pg-")
    with tempfile.TemporaryDirectory(prefix="plait-trips-") as tmp_name, server as dsn:
        tmp = Path(tmp_name)
        archive = subprocess.run(["git", "archive", args.base, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        (tmp / "base.tar").write_bytes(archive)
        with tarfile.open(tmp / "base.tar") as tar:
            tar.extractall(tmp / "base", filter="data")
        corpus = SCIFACT / "corpus.jsonl"
        if args.docs:
            corpus = tmp / "corpus.jsonl"
            with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as src:
                corpus.write_text("".join(line for _, line in zip(range(args.docs), src, strict=False)), encoding="utf-8")
        if args.dsn:
            lite = args.lite
            kept = PostgresStore(dsn, schema=args.schema, vacuum_after=None)
            out["chunks"] = len(kept.chunk_ids("sf"))
            kept.close()
        else:
            lite = str(tmp / "lite.db")
            t = time.perf_counter()
            with Plait(PostgresStore(dsn, schema=args.schema, vacuum_after=None), embedder=FakeEmbedder(dimension=DIM, model="hash-384")) as pg:
                pg.index(corpus, collection="sf")
                pg.store.vacuum()  # type: ignore[attr-defined]
                out["chunks"] = len(pg.store.chunk_ids("sf"))
            with Plait(lite, embedder=FakeEmbedder(dimension=DIM, model="hash-384")) as sq:
                sq.index(corpus, collection="sf")
            out["index_s"] = round(time.perf_counter() - t, 1)
        (tmp / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import postgres_trips as b; "
                f"b.worker({dsn!r}, {lite!r}, json.load(open({str(tmp / 'texts.json')!r})), {args.schema!r})")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        procs = {
            name: subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                   env={**env, "PYTHONPATH": str(src)})
            for name, src in (("base", tmp / "base" / "src"), ("this", ROOT / "src"))
        }

        def ask(name: str, line: str) -> dict[str, Any]:
            proc = procs[name]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            reply: dict[str, Any] = json.loads(proc.stdout.readline())
            return reply

        lat: dict[str, list[float]] = {f"{v}_{s}": [] for v in ("base", "this") for s in ("pg", "lite")}
        same = 0
        pg_is_lite = dict.fromkeys(procs, 0)
        for i in [i for _ in range(args.passes) for i in range(len(texts))]:
            hits = {}
            for store in ("pg", "lite"):
                for name in ("base", "this"):
                    reply = ask(name, f"{store} {i}")
                    lat[f"{name}_{store}"].append(reply["ms"])
                    hits[(name, store)] = reply["hits"]
            same += hits[("base", "pg")] == hits[("this", "pg")] and hits[("base", "lite")] == hits[("this", "lite")]
            for name in procs:
                pg_is_lite[name] += hits[(name, "pg")] == hits[(name, "lite")]
        out["round_trips_per_warm_pg_search"] = {name: ask(name, "trips")["trips"] for name in procs}
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
    out.update({key: _pcts(values) for key, values in lat.items()})
    out["pg_p50_ratio_this_vs_base"] = round(out["this_pg"]["p50_ms"] / out["base_pg"]["p50_ms"], 2)
    out["pg_vs_sqlite_p50_this"] = round(out["this_pg"]["p50_ms"] / out["this_lite"]["p50_ms"], 2)
    out["pg_vs_sqlite_p50_base"] = round(out["base_pg"]["p50_ms"] / out["base_lite"]["p50_ms"], 2)
    out["identical_hits_base_vs_this"] = f"{same}/{len(texts) * args.passes}"
    out["identical_hits_pg_vs_sqlite"] = {name: f"{n}/{len(texts) * args.passes}" for name, n in pg_is_lite.items()}
    out["passes"] = args.passes
    out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "postgres_trips.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    rows = [f"| {name} | {store} | {out[f'{name}_{store}']['p50_ms']} | {out[f'{name}_{store}']['p95_ms']} |"
            for store in ("pg", "lite") for name in ("base", "this")]
    md = [
        "# PostgreSQL round trips per search (issue 26)",
        "",
        f"`benchmarks/postgres_trips.py`, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: base {out['base']} vs this "
        f"{out['this']}; SciFact, {out['chunks']} chunks, {out['queries']} test queries, k=10, fake 384-d vectors, "
        f"queries interleaved in one run; {out['cpus']} CPUs, load average {out['load_average_start']} at the start, "
        f"{out['load_average_end']} at the end (a shared machine: read the ratios).",
        "",
        f"Round trips of one warm PostgreSQL search (embedder given as an object): {out['round_trips_per_warm_pg_search']}.",
        f"Hits identical base vs this on both stores: {out['identical_hits_base_vs_this']}; PostgreSQL's hits "
        f"identical to SQLite's: {out['identical_hits_pg_vs_sqlite']}.",
        "",
        "| code | store | p50 ms | p95 ms |",
        "|---|---|---|---|",
        *rows,
        "",
        f"PostgreSQL p50 this / base: {out['pg_p50_ratio_this_vs_base']}; PostgreSQL / SQLite p50: "
        f"this {out['pg_vs_sqlite_p50_this']}, base {out['pg_vs_sqlite_p50_base']}.",
        "",
    ]
    (RESULTS / "postgres_trips.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
