"""The first PostgreSQL lexical search after a write: the change log applied vs a full reload.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/postgres_after_write.py [--scale 11] [--rounds 20]

A private PostgreSQL (``pgserver``) gets SciFact (``../shared/data/scifact``, indexed
lexical-only through ``Plait.index``) copied ``--scale`` times into one collection (11:
100,331 chunks, one ``INSERT … SELECT``, then ``VACUUM (ANALYZE)``). Two reader stores
on it (two pools, as two serving processes): *incremental* (the default,
``incremental_share=0.1``, the lexical index capped at 1 %: the change log applied to the cached index) and *full*
(``incremental_share=0``: the cached index dropped and reloaded, the behaviour before
migration 10), both warmed with every query first. A third store writes; after each
write both readers answer the same query (which one first alternates), timed. Writes:

* *one document*: one SciFact document re-indexed with its text changed (its chunks
  deleted and inserted again, one ``replace_source``: two generations);
* *1 %*: as many documents as make 1 % of the chunks re-indexed in one
  ``replace_sources`` (about 2 % of the row ids: removed + added).

Reported: p50 / p95 of the first query after the write for both readers and their
ratio, how many of those answers were equal (ids and scores), how many incremental
answers fell back to a full reload, and the write's own time. Results go to
``benchmarks/results/postgres_after_write.{json,md}``; ``run_all.py``'s PostgreSQL
section runs :func:`after_writes` on its 100k collection too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
BIG = "big"
Terms = tuple[list[str], list[str]]


def copy_collection(store: Any, source: str, target: str, scale: int) -> float:
    """Copy collection ``source`` ``scale`` times into ``target`` (distinct chunk and source
    ids, one statement: the triggers fill the postings); returns the seconds taken."""
    store.ensure_collection(target)
    t = time.perf_counter()
    with store._tx() as conn:
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(
            "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, content_hash, "
            "origin, metadata, lex_exact, lex_stems) SELECT b.id, c.chunk_id || '~' || g, c.source_id || '~' || g, "
            "c.scope, c.ordinal, c.content, c.content_hash, c.origin, c.metadata, c.lex_exact, c.lex_stems "
            "FROM plait_chunks c, plait_collections s, plait_collections b, generate_series(1, %s) g "
            "WHERE s.name = %s AND b.name = %s AND c.collection_id = s.id ORDER BY g, c.id",
            (scale, source, target),
        )
    return time.perf_counter() - t


def _pcts(values: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def _sources(store: Any, collection: str) -> list[tuple[str, int]]:
    with store._read() as conn:
        rows = conn.execute(
            "SELECT c.source_id, count(*) FROM plait_chunks c JOIN plait_collections p ON p.id = c.collection_id "
            "WHERE p.name = %s GROUP BY 1 ORDER BY 1",
            (collection,),
        ).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def _revised(store: Any, collection: str, source: str, revision: int) -> Any:
    """The source's chunks with their text changed (so re-indexing deletes and inserts
    them), analysed as the indexer does."""
    from plait.analysis import analyse
    from plait.stores.base import SourceWrite, StoredChunk
    from plait.types import Chunk, FileOrigin

    with store._read() as conn:
        rows = conn.execute(
            "SELECT c.chunk_id, c.content, c.ordinal, c.scope FROM plait_chunks c JOIN plait_collections p "
            "ON p.id = c.collection_id WHERE p.name = %s AND c.source_id = %s ORDER BY c.ordinal",
            (collection, source),
        ).fetchall()
    chunks = []
    for chunk_id, content, ordinal, scope in rows:
        text = f"{content} revision{revision}"
        fields = analyse(text)
        chunk = Chunk(id=chunk_id, source_id=source, scope=scope, content=text, ordinal=ordinal,
                      content_hash=hashlib.sha256(text.encode()).hexdigest(),
                      origin=FileOrigin(source_path=source, heading_path=[], title=source))
        chunks.append(StoredChunk(chunk, fields.exact, fields.stems, None))
    return SourceWrite(source, rows[0][3] if rows else "docs", chunks, "")


def after_writes(
    dsn: str, schema: str, terms: Sequence[Terms], *, collection: str = BIG, rounds: int = 20,
    share_rounds: int = 3, shares: Sequence[float] = (0.01,),
) -> dict[str, Any]:
    """The first lexical query after each write, incremental reader vs full-reload reader
    (see the module docstring). The writer is a store of its own with a 15-minute
    statement timeout: deleting 1 % of 100k chunks runs the statistics trigger's
    postings ``DELETE`` for over a minute on a busy machine."""
    from plait.stores.postgres import PostgresStore

    class Reader(PostgresStore):
        full_reloads = 0

        def _full(self, *args: Any, **kwargs: Any) -> Any:
            self.full_reloads += 1
            return super()._full(*args, **kwargs)

    readers = {"incremental": Reader(dsn, schema=schema), "full": Reader(dsn, schema=schema, incremental_share=0.0)}
    writer = PostgresStore(dsn, schema=schema, statement_timeout=900.0, vacuum_after=None)
    try:
        cold: list[float] = []  # the incremental reader's first pass: each term's postings read on its first query
        for name, reader in readers.items():
            for n, (exact, stems) in enumerate([*terms, *terms]):
                t = time.perf_counter()
                reader.lexical_search(collection, exact, stems, limit=50)
                if name == "incremental" and n < len(terms):
                    cold.append((time.perf_counter() - t) * 1000)
        sources = _sources(writer, collection)
        chunks = sum(n for _, n in sources)
        out: dict[str, Any] = {"chunks": chunks, "queries": len(terms),
                               "load_average_start": [round(x, 1) for x in os.getloadavg()],
                               "first_query_ms": round(cold[0], 1), "cold": _pcts(cold[1:])}
        warm: list[float] = []
        for exact, stems in terms[:rounds]:  # the reference: the same queries with no write before them
            t = time.perf_counter()
            readers["incremental"].lexical_search(collection, exact, stems, limit=50)
            warm.append((time.perf_counter() - t) * 1000)
        out["warm"] = _pcts(warm)
        plans: list[tuple[str, int, list[list[str]]]] = [
            ("one_document", rounds, [[sources[(7919 * i) % len(sources)][0]] for i in range(rounds)])]
        for share in shares:
            picked: list[list[str]] = []
            for r in range(share_rounds):
                names, total, i = [], 0, r * 104729
                while total < share * chunks:
                    name, n = sources[i % len(sources)]
                    names.append(name)
                    total += n
                    i += 1
                picked.append(names)
            plans.append((f"share_{share:g}", share_rounds, picked))
        revision = 0
        for name, count, picks in plans:
            lat: dict[str, list[float]] = {k: [] for k in readers}
            write_ms: list[float] = []
            same = 0
            fallbacks = {k: r.full_reloads for k, r in readers.items()}
            rows = 0
            for i in range(count):
                revision += 1
                writes = [_revised(writer, collection, s, revision) for s in picks[i]]
                rows += sum(len(w.chunks) for w in writes)
                t = time.perf_counter()
                writer.replace_sources(collection, writes)
                write_ms.append((time.perf_counter() - t) * 1000)
                exact, stems = terms[i % len(terms)]
                order = list(readers) if i % 2 == 0 else list(reversed(readers))
                got: dict[str, object] = {}
                for key in order:
                    t = time.perf_counter()
                    got[key] = readers[key].lexical_search(collection, exact, stems, limit=50)
                    lat[key].append((time.perf_counter() - t) * 1000)
                same += got["incremental"] == got["full"]
            inc, full = _pcts(lat["incremental"]), _pcts(lat["full"])
            out[name] = {
                "writes": count, "chunks_rewritten_per_write": round(rows / count, 1),
                "incremental": inc, "full_reload": full,
                "ratio_p50_full_over_incremental": round(full["p50_ms"] / inc["p50_ms"], 1),
                "identical": f"{same}/{count}",
                "incremental_fell_back": readers["incremental"].full_reloads - fallbacks["incremental"],
                "write": _pcts(write_ms),
            }
            print(f"  after-write {name}: {out[name]}", flush=True)
        out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
        return out
    finally:
        writer.close()
        for reader in readers.values():
            reader.close()


def markdown(r: dict[str, Any] | None) -> list[str]:
    if not r:
        return []
    lines = [(f"First lexical query (top 50) right after a write, {r['chunks']:,} chunks, two reader stores side by "
              f"side (same queries, order alternating): the change log applied (*incremental*, the default) vs the "
              f"cached index dropped and reloaded (*full*, `incremental_share=0`, the behaviour before migration 10). "
              f"Load average {r['load_average_start']} at the start, {r['load_average_end']} at the end."
              + (f" The same queries warm (no write before them), same run: p50 {r['warm']['p50_ms']} ms, "
                 f"p95 {r['warm']['p95_ms']} ms." if r.get("warm") else "")
              + (f" Cold, the incremental reader's first pass over the {r['queries']} queries (each term's postings read "
                 f"on its first query; the first query, which also reads every chunk's lengths, apart: "
                 f"{r['first_query_ms']} ms): p50 {r['cold']['p50_ms']} ms, p95 {r['cold']['p95_ms']} ms."
                 if r.get("cold") else "")), "",
             "| write | chunks re-indexed per write | incremental p50 / p95 ms | full reload p50 / p95 ms | "
             "full / incremental (p50) | answers identical | incremental fell back | write p50 ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in [k for k in r if k == "one_document" or k.startswith("share_")]:
        m = r[name]
        label = "one document" if name == "one_document" else f"{float(name[6:]) * 100:g} % of the chunks"
        lines.append(f"| {label} ({m['writes']} writes) | {m['chunks_rewritten_per_write']} | {m['incremental']['p50_ms']} / "
                     f"{m['incremental']['p95_ms']} | {m['full_reload']['p50_ms']} / {m['full_reload']['p95_ms']} | "
                     f"x{m['ratio_p50_full_over_incremental']} | {m['identical']} | {m['incremental_fell_back']} | "
                     f"{m['write']['p50_ms']} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--share-rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--docs", type=int, default=None, help="index only the first N SciFact documents (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_after_write")
    args = parser.parse_args()

    from plait.retrieval.plan import lexical_terms
    from plait.service import Plait
    from plait.stores.postgres import PostgresStore
    from plait.testing.pg import private_postgres

    test_ids = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    texts = [q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open(encoding="utf-8")) if q["_id"] in test_ids]
    terms = [lexical_terms(q) for q in texts[: args.queries]]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report: dict[str, Any] = {"commit": commit, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              "cpus": os.cpu_count(), "scale": args.scale, "docs": args.docs or "all"}
    with private_postgres("plait-after-write-") as dsn:
        store = PostgresStore(dsn, schema="plait_aw", vacuum_after=None)
        try:
            corpus = SCIFACT / "corpus.jsonl"
            if args.docs is not None:
                lines = corpus.read_text(encoding="utf-8").splitlines()[: args.docs]
                corpus = Path(tempfile.mkdtemp(prefix="plait-aw-")) / "corpus.jsonl"
                corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
            t = time.perf_counter()
            Plait(store, embedder="none").index(corpus, collection="sf")  # not closed: that would close the store
            report["index_s"] = round(time.perf_counter() - t, 1)
            report["load_s"] = round(copy_collection(store, "sf", BIG, args.scale), 1)
            t = time.perf_counter()
            store.vacuum()
            report["vacuum_s"] = round(time.perf_counter() - t, 1)
            report.update(after_writes(dsn, "plait_aw", terms, rounds=args.rounds, share_rounds=args.share_rounds))
        finally:
            store.close()
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    busy = max(report["load_average_start"][0], report["load_average_end"][0]) > (report["cpus"] or 1)
    head = [f"# PostgreSQL: the first lexical search after a write ({report['date']}, {commit})", "",
            (f"**{'Busy machine' if busy else 'Machine'}**: {report['cpus']} cores"
             + (", other jobs running: absolute times are inflated, read the ratios (measured side by side)." if busy else ".")),
            "", f"SciFact indexed in {report['index_s']} s, copied x{args.scale} in {report['load_s']} s, vacuumed in "
            f"{report['vacuum_s']} s.", ""]
    args.out.with_suffix(".md").write_text("\n".join([*head, *markdown(report), ""]), encoding="utf-8")
    print("\n".join(markdown(report)))


if __name__ == "__main__":
    main()
