"""Copy throughput between stores (issue 27): chunks per second, no embedding call.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/copy_throughput.py --chunks 100000
    PYTHONPATH=src .venv/bin/python benchmarks/copy_throughput.py --chunks 20000 --dsn postgresql://…
    PYTHONPATH=src .venv/bin/python benchmarks/copy_throughput.py --chunks 100000 --milvus-chunks 10000

A SQLite store is filled directly (``replace_source``, no chunking, no model) with
``--chunks`` chunks of ~60 words of synthetic text in sources of ``--per-source`` chunks,
each with a random unit vector of ``--dimension`` (384, the e5-small size). Then it is
copied SQLite → PostgreSQL (``pgserver`` in a temporary folder unless ``--dsn`` /
``PLAIT_PG_DSN``) and PostgreSQL → a fresh SQLite file with
:func:`plait.copying.copy_collection`; with ``--milvus-chunks N``, a SQLite store of N
chunks (the same generator) is also copied to milvus-lite and back. Each copy's wall
time (verification excluded: it is timed separately) and chunks/s go to
``benchmarks/results/copy_throughput.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from psycopg import sql

from plait.analysis import analyse
from plait.copying import copy_collection, verify_copy
from plait.fields import lexical_text
from plait.stores.base import Store, StoredChunk
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.pg import postgres_dsn
from plait.types import Chunk, FileOrigin

RESULTS = Path(__file__).resolve().parent / "results"
_WORDS = ["checkout", "payment", "declined", "card", "token", "session", "inventory", "stock", "tenant", "routing", "retry", "timeout", "refund", "ledger", "invoice", "shipment", "warehouse", "order", "customer", "account", "balance", "transfer", "webhook", "queue", "worker", "ERR-4012", "SKU-88213-B", "v3.11.2", "resolve_tenant_db", "PIX-2024-88317"]


def fill(store: Store, *, chunks: int, per_source: int, dimension: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    store.ensure_collection("bench")
    store.set_embedder("bench", provider="fake", model=f"random-{dimension}", dimension=dimension)
    made = 0
    source = 0
    while made < chunks:
        items = []
        sid = f"docs/s{source:06d}.md"
        for ordinal in range(min(per_source, chunks - made)):
            text = " ".join(rng.choice(_WORDS) for _ in range(60))
            chunk = Chunk(
                id=uuid.UUID(int=rng.getrandbits(128)).hex[:24], source_id=sid, scope="docs", content=text,
                content_hash=uuid.UUID(int=rng.getrandbits(128)).hex, ordinal=ordinal,
                origin=FileOrigin(source_path=sid, heading_path=["H"], title="T"),
            )
            vector = gen.standard_normal(dimension).astype(np.float32)
            vector /= np.linalg.norm(vector)
            fields = analyse(lexical_text(chunk))
            items.append(StoredChunk(chunk, list(fields.exact), list(fields.stems), vector))
        store.replace_source("bench", sid, "docs", items)
        made += len(items)
        source += 1


def timed(source: Store, target: Store) -> dict[str, object]:
    started = time.perf_counter()
    report = copy_collection(source, target, "bench", verify=False)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    check = verify_copy(source, target, "bench")
    return {
        "chunks": report.chunks_copied, "seconds": round(seconds, 2),
        "chunksPerSecond": round(report.chunks_copied / seconds, 1),
        "verifySeconds": round(time.perf_counter() - started, 2), "verified": check.ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--per-source", type=int, default=100)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--dsn", default=os.environ.get("PLAIT_PG_DSN"))
    parser.add_argument("--label", default="")
    parser.add_argument("--milvus-chunks", type=int, default=0, help="also copy this many chunks to milvus-lite and back")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="plait-copy-bench-"))
    runs: dict[str, object] = {"loadBefore": os.getloadavg()[0]}
    if args.milvus_chunks:
        from plait.stores.milvus import MilvusStore

        small = SQLiteStore(folder / "small.db")
        fill(small, chunks=args.milvus_chunks, per_source=args.per_source, dimension=args.dimension)
        milvus = MilvusStore(str(folder / "milvus.db"), prefix="bench")
        runs["sqlite->milvus-lite"] = timed(small, milvus)
        back_small = SQLiteStore(folder / "small-back.db")
        runs["milvus-lite->sqlite"] = timed(milvus, back_small)
        for store in (back_small, milvus, small):
            store.close()
    if args.skip_postgres:
        _write(args, runs, 0.0)
        return
    sqlite = SQLiteStore(folder / "from.db")
    started = time.perf_counter()
    fill(sqlite, chunks=args.chunks, per_source=args.per_source, dimension=args.dimension)
    fill_seconds = time.perf_counter() - started
    with postgres_dsn("plait-copy-bench-") if args.dsn is None else _given(args.dsn) as dsn:
        schema = f"plait_bench_{uuid.uuid4().hex[:8]}"
        pg = PostgresStore(dsn, schema=schema)
        try:
            runs["sqlite->postgres"] = timed(sqlite, pg)
            back = SQLiteStore(folder / "back.db")
            runs["postgres->sqlite"] = timed(pg, back)
            back.close()
            with pg._tx() as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        finally:
            pg.close()
    sqlite.close()
    _write(args, runs, fill_seconds)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _write(args: argparse.Namespace, runs: dict[str, object], fill_seconds: float) -> None:
    before = runs.pop("loadBefore")
    assert isinstance(before, float)
    load = (before, os.getloadavg()[0])
    result = {
        "chunks": args.chunks, "perSource": args.per_source, "dimension": args.dimension,
        "milvusChunks": args.milvus_chunks, "fillSeconds": round(fill_seconds, 1), "runs": runs, "label": args.label,
        "machine": f"{_cpu()}, {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "loadAverage": {"start": round(float(load[0]), 2), "end": round(float(load[1]), 2)},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "copy_throughput.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# Copy throughput (plait copy, no embedding call)", "",
        f"Synthetic chunks ({args.per_source} per source, {args.dimension}-d vectors, ~60 words each; "
        f"PostgreSQL pairs {0 if args.skip_postgres else args.chunks:,} chunks, milvus-lite pairs {args.milvus_chunks:,}); "
        f"{result['machine']}; {result['date']}, 1-min load average {load[0]:.2f} at the start, "
        f"{load[1]:.2f} at the end. {args.label}", "",
        "| copy | chunks | seconds | chunks/s | verify s | verified |", "|---|---:|---:|---:|---:|---|",
    ]
    for name, run in runs.items():
        assert isinstance(run, dict)
        lines.append(f"| {name} | {run['chunks']:,} | {run['seconds']} | {run['chunksPerSecond']} | "
                     f"{run['verifySeconds']} | {run['verified']} |")
    (RESULTS / "copy_throughput.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


class _given:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def __enter__(self) -> str:
        return self.dsn

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
