"""The PostgreSQL section of ``benchmarks/run_all.py``: PostgreSQL + pgvector against the
embedded SQLite store, side by side in one run (issue 26).

On one private PostgreSQL (``pgserver``) and one SQLite file, both holding SciFact
(5,183 documents → ~9.1k chunks, fake 384-d vectors: latency only) indexed through
``Plait.index``:

* lexical arm p50 right after the load (before any vacuum; the store is opened with
  ``vacuum_after=None`` so it does not vacuum by itself) and after ``VACUUM (ANALYZE)``;
* hybrid ``Plait.search(k=10)`` p50/p95 on both stores, the queries interleaved
  (PostgreSQL, then SQLite, query by query), and their ratio;
* postings bytes per posting (heap + primary key) after the load and after the vacuum;
* with ``scale`` > 1: the collection copied ``scale`` times into one collection (distinct
  chunk ids, one SQL statement: the statistics triggers fill the postings) and vacuumed,
  then the lexical p50 there — pruned (the store's statement at that size) and
  exhaustive (the same statement with pruning off), same queries, same connection.

Figures are wall-clock milliseconds per query on whatever machine runs it; on a shared
machine label them so and read the ratios.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _pcts(values: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def _lexical_ms(run: Callable[[list[str], list[str]], object], terms: Sequence[tuple[list[str], list[str]]]) -> dict[str, float]:
    lat = []
    for exact, stems in terms:
        t = time.perf_counter()
        run(exact, stems)
        lat.append((time.perf_counter() - t) * 1000)
    return _pcts(lat)


def _postings_bytes(store: Any) -> dict[str, Any]:
    with store._read() as conn:
        row = conn.execute(
            "SELECT count(*), pg_relation_size('plait_postings'), pg_indexes_size('plait_postings') FROM plait_postings"
        ).fetchone()
    n, heap, index = int(row[0]), int(row[1]), int(row[2])
    return {
        "postings": n,
        "heap_bytes_per_posting": round(heap / max(n, 1), 1),
        "index_bytes_per_posting": round(index / max(n, 1), 1),
        "bytes_per_posting": round((heap + index) / max(n, 1), 1),
    }


def run(tmp: Path, corpus: Path, texts: list[str], *, dim: int, scale: int = 11, scaled_queries: int = 100) -> dict[str, Any]:
    from plait.embeddings.fake import FakeEmbedder
    from plait.retrieval.plan import lexical_terms
    from plait.service import Plait
    from plait.stores.base import BM25Params
    from plait.stores.postgres import PostgresStore
    from plait.stores.postgres_lexical import lexical_query, rescore
    from plait.testing.pg import private_postgres

    hasher = FakeEmbedder(dimension=dim, model="hash-384")
    vectors = {q: hasher.embed_query(q) for q in texts}

    class Precomputed(FakeEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            hit = vectors.get(text)  # index-time pseudo-queries (arm estimate) are not timed
            return FakeEmbedder.embed_query(self, text) if hit is None else hit

    terms = [lexical_terms(q) for q in texts]
    out: dict[str, Any] = {"queries": len(texts), "k": 10, "lexical_limit": 50,
                           "load_average_start": [round(x, 1) for x in os.getloadavg()], "cpus": os.cpu_count()}
    with private_postgres("plait-perf-pg-") as dsn:
        pg_store = PostgresStore(dsn, schema="plait_perf", vacuum_after=None)
        with Plait(pg_store, embedder=Precomputed(dimension=dim, model="hash-384")) as pg, Plait(
            str(tmp / "pg-side.db"), embedder=Precomputed(dimension=dim, model="hash-384")
        ) as lite:
            t = time.perf_counter()
            pg.index(corpus, collection="sf")
            out["pg_index_s"] = round(time.perf_counter() - t, 1)
            t = time.perf_counter()
            lite.index(corpus, collection="sf")
            out["sqlite_index_s"] = round(time.perf_counter() - t, 1)
            out["chunks"] = len(pg_store.chunk_ids("sf"))

            def pg_lex(e: list[str], s: list[str]) -> object:
                return pg_store.lexical_search("sf", e, s, limit=50)

            def lite_lex(e: list[str], s: list[str]) -> object:
                return lite.store.lexical_search("sf", e, s, limit=50)

            out["postings_after_load"] = _postings_bytes(pg_store)
            out["lexical_after_load"] = _lexical_ms(pg_lex, terms)
            t = time.perf_counter()
            pg_store.vacuum()
            out["vacuum_s"] = round(time.perf_counter() - t, 1)
            out["lexical_after_vacuum"] = _lexical_ms(pg_lex, terms)
            out["postings_after_vacuum"] = _postings_bytes(pg_store)
            out["sqlite_lexical"] = _lexical_ms(lite_lex, terms)
            for q in texts[:50]:  # warm both
                pg.search(q, collection="sf", k=10)
                lite.search(q, collection="sf", k=10)
            pg_lat: list[float] = []
            lite_lat: list[float] = []
            for q in texts:
                t = time.perf_counter()
                pg.search(q, collection="sf", k=10)
                pg_lat.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                lite.search(q, collection="sf", k=10)
                lite_lat.append((time.perf_counter() - t) * 1000)
            out["hybrid_pg"] = _pcts(pg_lat)
            out["hybrid_sqlite"] = _pcts(lite_lat)
            out["hybrid_ratio_p50"] = round(out["hybrid_pg"]["p50_ms"] / out["hybrid_sqlite"]["p50_ms"], 2)
            same = sum(pg_store.lexical_search("sf", e, s, limit=50) == lite.store.lexical_search("sf", e, s, limit=50) for e, s in terms)
            out["identical_lexical_top50_vs_sqlite"] = f"{same}/{len(terms)}"
            out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
            if scale > 1:
                out["scaled"] = _scaled(pg_store, terms[:scaled_queries], scale, lexical_query, rescore, BM25Params())
        pg_store.close()
    return out


def _scaled(store: Any, terms: Sequence[tuple[list[str], list[str]]], scale: int, lexical_query: Any, rescore: Any, params: Any) -> dict[str, Any]:
    store.ensure_collection("big")
    t = time.perf_counter()
    with store._tx() as conn:
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(
            "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, content_hash, "
            "origin, metadata, lex_exact, lex_stems) SELECT b.id, c.chunk_id || '~' || g, c.source_id || '~' || g, "
            "c.scope, c.ordinal, c.content, c.content_hash, c.origin, c.metadata, c.lex_exact, c.lex_stems "
            "FROM plait_chunks c, plait_collections s, plait_collections b, generate_series(1, %s) g "
            "WHERE s.name = 'sf' AND b.name = 'big' AND c.collection_id = s.id ORDER BY g, c.id",
            (scale,),
        )
    load_s = time.perf_counter() - t
    with store._read() as conn:
        cid = store._collection(conn, "big")[0]
        after_load = _exhaustive_or_pruned(conn, cid, terms, lexical_query, rescore, params, large=True)
    t = time.perf_counter()
    store.vacuum()
    vacuum_s = time.perf_counter() - t
    store.lexical_search("big", *terms[0], limit=50)  # learn the collection's size
    pruned = _lexical_ms(lambda e, s: store.lexical_search("big", e, s, limit=50), terms)
    with store._read() as conn:
        exhaustive = _exhaustive_or_pruned(conn, cid, terms, lexical_query, rescore, params, large=False)
        # the statement before the staged probes and min_ratio bounds (8cd1bac), same data
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import postgres_lexical_v5

        before = _exhaustive_or_pruned(conn, cid, terms, postgres_lexical_v5.lexical_query, rescore, params, large=True)
    same = sum(
        store.lexical_search("big", e, s, limit=50) == _one(store, cid, e, s, lexical_query, rescore, params, large=False)
        for e, s in terms
    )
    chunks = store.get_collection("big").chunks
    return {
        "copies": scale, "chunks": chunks, "queries": len(terms), "load_s": round(load_s, 1),
        "vacuum_s": round(vacuum_s, 1), "lexical_pruned_after_load": after_load,
        "lexical_pruned": pruned, "lexical_exhaustive": exhaustive, "lexical_pruned_before": before,
        "identical_pruned_vs_exhaustive": f"{same}/{len(terms)}",
        "postings": _postings_bytes(store),
    }


def _one(store: Any, cid: int, e: list[str], s: list[str], lexical_query: Any, rescore: Any, params: Any, *, large: bool) -> object:
    with store._read() as conn:
        return _query(conn, cid, e, s, lexical_query, rescore, params, large=large)


def _query(conn: Any, cid: int, e: list[str], s: list[str], lexical_query: Any, rescore: Any, params: Any, *, large: bool) -> object:
    built = lexical_query(cid, e, s, limit=50, filters=None, params=params, large=large)
    if built is None:
        return []
    return rescore(conn.execute(*built, prepare=True).fetchall(), e, s, limit=50, params=params)


def _exhaustive_or_pruned(conn: Any, cid: int, terms: Sequence[tuple[list[str], list[str]]], lexical_query: Any, rescore: Any, params: Any, *, large: bool) -> dict[str, float]:
    return _lexical_ms(lambda e, s: _query(conn, cid, e, s, lexical_query, rescore, params, large=large), terms)


def markdown(pg: dict[str, Any] | None) -> list[str]:
    if not pg or "hybrid_pg" not in pg:
        return ["Not run."]
    busy = max(pg.get("load_average_start", [0])[0], pg.get("load_average_end", [0])[0]) > (pg.get("cpus") or 1)
    lines = [
        (f"**{'Busy machine' if busy else 'Machine'}**: load average {pg.get('load_average_start')} at the start, "
         f"{pg.get('load_average_end')} after the hybrid runs, on {pg.get('cpus')} cores"
         + (" (other jobs running: absolute times are inflated; read the ratios, measured side by side)." if busy else ".")), "",
        (f"SciFact, {pg['chunks']} chunks, {pg['queries']} queries, fake 384-d vectors (latency only), query "
         f"embedding excluded; PostgreSQL (pgserver) and SQLite measured in the same run, queries interleaved. "
         f"Indexing: PostgreSQL {pg['pg_index_s']} s, SQLite {pg['sqlite_index_s']} s."), "",
        "| measure | PostgreSQL p50 / p95 ms | SQLite p50 / p95 ms | ratio (p50) |", "| --- | --- | --- | --- |",
        (f"| hybrid `Plait.search(k=10)` | {pg['hybrid_pg']['p50_ms']} / {pg['hybrid_pg']['p95_ms']} | "
         f"{pg['hybrid_sqlite']['p50_ms']} / {pg['hybrid_sqlite']['p95_ms']} | x{pg['hybrid_ratio_p50']} |"),
        (f"| lexical arm (top 50), after `VACUUM (ANALYZE)` | {pg['lexical_after_vacuum']['p50_ms']} / "
         f"{pg['lexical_after_vacuum']['p95_ms']} | {pg['sqlite_lexical']['p50_ms']} / {pg['sqlite_lexical']['p95_ms']} | "
         f"x{round(pg['lexical_after_vacuum']['p50_ms'] / pg['sqlite_lexical']['p50_ms'], 2)} |"),
        (f"| lexical arm right after the load (no vacuum yet) | {pg['lexical_after_load']['p50_ms']} / "
         f"{pg['lexical_after_load']['p95_ms']} | | |"), "",
        (f"Lexical top 50 identical to SQLite's (ids and scores): {pg['identical_lexical_top50_vs_sqlite']}. "
         f"Vacuum after the load: {pg['vacuum_s']} s. Postings: {pg['postings_after_vacuum']['postings']:,}, "
         f"{pg['postings_after_vacuum']['bytes_per_posting']} bytes per posting (heap "
         f"{pg['postings_after_vacuum']['heap_bytes_per_posting']} + primary key "
         f"{pg['postings_after_vacuum']['index_bytes_per_posting']}) after the indexer's incremental load."),
    ]
    big = pg.get("scaled")
    if big:
        lines += ["", (f"At scale: SciFact copied {big['copies']}× into one collection ({big['chunks']:,} chunks, "
                       f"loaded in {big['load_s']} s by one INSERT, vacuumed in {big['vacuum_s']} s), first {big['queries']} queries, top 50:"), "",
                  "| lexical arm | p50 ms | p95 ms |", "| --- | --- | --- |",
                  f"| pruned (the store's statement), after vacuum | {big['lexical_pruned']['p50_ms']} | {big['lexical_pruned']['p95_ms']} |",
                  f"| exhaustive (pruning off), after vacuum | {big['lexical_exhaustive']['p50_ms']} | {big['lexical_exhaustive']['p95_ms']} |",
                  *([f"| pruned as before (8cd1bac's statement), after vacuum | {big['lexical_pruned_before']['p50_ms']} | "
                     f"{big['lexical_pruned_before']['p95_ms']} |"] if "lexical_pruned_before" in big else []),
                  f"| pruned, right after the load | {big['lexical_pruned_after_load']['p50_ms']} | {big['lexical_pruned_after_load']['p95_ms']} |", "",
                  (f"Pruned and exhaustive top 50 identical: {big['identical_pruned_vs_exhaustive']}. Postings at this size: "
                   f"{big['postings']['bytes_per_posting']} bytes per posting (bulk-inserted)."), ""]
    return lines

