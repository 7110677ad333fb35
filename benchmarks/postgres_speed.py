"""The PostgreSQL section of ``benchmarks/run_all.py``: PostgreSQL + pgvector against the
embedded SQLite store, side by side in one run (issue 26).

On one private PostgreSQL (``pgserver``) and one SQLite file, both holding SciFact
(5,183 documents → ~9.1k chunks, fake 384-d vectors: latency only) indexed through
``Plait.index``:

* lexical arm p50 right after the load (before any vacuum; the store is opened with
  ``vacuum_after=None`` so it does not vacuum by itself): the first pass over the
  queries, each term's postings read on its first query (*cold*), then after
  ``VACUUM (ANALYZE)`` a second pass (*warm*: every term cached, BM25 in process);
* hybrid ``Plait.search(k=10)`` p50/p95 on both stores, the queries interleaved
  (PostgreSQL, then SQLite, query by query), and their ratio;
* hybrid p50/p95 of queries the process has not seen, on engines opened afresh: PostgreSQL
  with the whole load (default ``whole_bytes``) and without (``whole_bytes=0``) against
  SQLite, interleaved, with the round trips per new query (``postgres_new_queries``);
* postings bytes per posting (heap + primary key) after the load and after the vacuum,
  and what the serving process holds for the collection's lexical index;
* with ``scale`` > 1: the collection copied ``scale`` times into one collection (distinct
  chunk ids, one SQL statement: the statistics triggers fill the postings and bump the
  generation) and vacuumed, then the lexical p50 there: *reload* (the cache dropped before
  every query, as after a write: lengths and the query's postings read again), *cold*
  (one pass, each term read on its first query) and *warm* (the same queries again), and
  the SQL statement the store used before (d9f3a8a, frozen in ``postgres_lexical_sql.py``)
  on the same data and connection pool; then the first query after real writes (one
  document, 1 % of the chunks re-indexed), the change log applied against a full
  reload side by side (``postgres_after_write.after_writes``).

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


def _lexical_ms(run: Callable[[list[str], list[str]], object], terms: Sequence[tuple[list[str], list[str]]]) -> dict[str, Any]:
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
    from plait.testing.pg import private_postgres

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from postgres_lexical_sql import lexical_query, rescore

    hasher = FakeEmbedder(dimension=dim, model="hash-384")
    vectors = {q: hasher.embed_query(q) for q in texts}

    class Precomputed(FakeEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            hit = vectors.get(text)  # index-time pseudo-queries (arm estimate) are not timed
            return FakeEmbedder.embed_query(self, text) if hit is None else hit

        def cached_query(self, text: str) -> np.ndarray | None:
            return vectors.get(text)  # held: the query guard takes it without a thread (as run_all's)

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
            pg_store._lexicon.clear()  # the indexer's own searches may have cached some terms
            out["lexical_after_load"] = _lexical_ms(pg_lex, terms)  # cold: first query per term
            t = time.perf_counter()
            pg_store.vacuum()
            out["vacuum_s"] = round(time.perf_counter() - t, 1)
            out["lexical_after_vacuum"] = _lexical_ms(pg_lex, terms)  # warm
            out["postings_after_vacuum"] = _postings_bytes(pg_store)
            out["lexical_index"] = _index_bytes(pg_store, "sf")
            out["sqlite_lexical"] = _lexical_ms(lite_lex, terms)
            for q in texts[:50]:  # warm both
                pg.search(q, collection="sf", k=10)
                lite.search(q, collection="sf", k=10)
            pg_lat: list[float] = []
            lite_lat: list[float] = []
            # which engine goes first alternates: the second gets the hits' snippet texts
            # from the process-wide cache the first filled (plait.snippets), so a fixed
            # order favoured SQLite (PostgreSQL paid every new text's analysis)
            for i, q in enumerate(texts):
                for engine, lat in ((pg, pg_lat), (lite, lite_lat))[:: 1 if i % 2 == 0 else -1]:
                    t = time.perf_counter()
                    engine.search(q, collection="sf", k=10)
                    lat.append((time.perf_counter() - t) * 1000)
            out["hybrid_pg"] = _pcts(pg_lat)
            out["hybrid_sqlite"] = _pcts(lite_lat)
            out["hybrid_ratio_p50"] = round(out["hybrid_pg"]["p50_ms"] / out["hybrid_sqlite"]["p50_ms"], 2)
            same = sum(pg_store.lexical_search("sf", e, s, limit=50) == lite.store.lexical_search("sf", e, s, limit=50) for e, s in terms)
            out["identical_lexical_top50_vs_sqlite"] = f"{same}/{len(terms)}"
            out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
            from postgres_new_queries import measure

            out["new_queries"] = measure(
                dsn, "plait_perf", tmp / "pg-side.db", texts, lambda: Precomputed(dimension=dim, model="hash-384"),
                collection="sf",
            )
            if scale > 1:
                out["scaled"] = _scaled(pg_store, terms[:scaled_queries], scale, lexical_query, rescore, BM25Params(),
                                        dsn=dsn, schema="plait_perf")
        pg_store.close()
    return out


def _index_bytes(store: Any, name: str) -> dict[str, Any]:
    """What the serving process holds for collection ``name``'s lexical index: the
    per-chunk arrays (row ids, lengths, chunk id strings) and the cached postings and
    score rows (arrays; the dictionaries holding them not counted)."""
    held = store._lexicon.get(store._known[name][0])
    if held is None:
        return {}
    index = held[1]
    per_chunk = index.rowids.nbytes + index.lengths.nbytes + sum(sys.getsizeof(i) + 8 for i in index.chunk_ids)
    terms = list(index._terms.values())
    postings = sum(t.positions.nbytes + t.tfs.nbytes for t in terms)
    rows = sum(r.scores.nbytes for t in terms for r in t.rows.values())
    cached = sum(t.positions.size for t in terms)
    whole = getattr(index, "whole", None)  # every posting, read whole (postgres_whole)
    if whole is not None:  # the cached terms' arrays are views of it
        cached, postings = int(whole.positions.size), int(whole.nbytes)
    return {"chunks": index.size, "per_chunk_bytes": per_chunk, "terms_cached": len(terms),
            "postings_cached": int(cached), "postings_bytes": postings, "score_row_bytes": rows,
            "whole": whole is not None, "total_mb": round((per_chunk + postings + rows) / 1e6, 1)}


def _scaled(
    store: Any, terms: Sequence[tuple[list[str], list[str]]], scale: int, lexical_query: Any, rescore: Any, params: Any,
    *, dsn: str, schema: str,
) -> dict[str, Any]:
    from postgres_after_write import after_writes, copy_collection

    load_s = copy_collection(store, "sf", "big", scale)
    t = time.perf_counter()
    store.vacuum()
    vacuum_s = time.perf_counter() - t

    def lex(e: list[str], s: list[str]) -> object:
        return store.lexical_search("big", e, s, limit=50)

    def reload(e: list[str], s: list[str]) -> object:
        store._lexicon.clear()  # what a write does to the next query: lengths and postings read again
        return lex(e, s)

    first = time.perf_counter()
    store._lexicon.clear()
    lex(*terms[0])
    first_ms = (time.perf_counter() - first) * 1000
    reloaded = {**_lexical_ms(reload, terms[:20]), "n": len(terms[:20])}
    store._lexicon.clear()
    cold = _lexical_ms(lex, terms)
    warm = _lexical_ms(lex, terms)
    index = _index_bytes(store, "big")
    with store._read() as conn:
        cid = store._collection(conn, "big")[0]
        sql_statement = _exhaustive_or_pruned(conn, cid, terms, lexical_query, rescore, params, large=True)
    same = sum(lex(e, s) == _one(store, cid, e, s, lexical_query, rescore, params, large=False) for e, s in terms)
    chunks = store.get_collection("big").chunks
    return {
        "copies": scale, "chunks": chunks, "queries": len(terms), "load_s": round(load_s, 1),
        "vacuum_s": round(vacuum_s, 1), "lexical_first_query_ms": round(first_ms, 1),
        "lexical_reload": reloaded, "lexical_cold": cold, "lexical_warm": warm,
        "lexical_sql_before": sql_statement, "lexical_index": index,
        "identical_in_process_vs_sql_exhaustive": f"{same}/{len(terms)}",
        "postings": _postings_bytes(store),
        # last: its writes change the collection the figures above were taken on
        "after_write": after_writes(dsn, schema, terms),
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


def _index_line(index: dict[str, Any] | None) -> str:
    if not index:
        return ""
    return (f" The serving process's lexical index of it after these queries: {index['total_mb']} MB "
            f"({index['per_chunk_bytes'] / max(index['chunks'], 1):.0f} B per chunk for row ids, lengths and chunk ids; "
            + (f"every posting read whole ({index['postings_cached']:,}), {index['terms_cached']:,} terms queried, "
               if index.get("whole") else f"{index['terms_cached']:,} terms cached with {index['postings_cached']:,} postings, ")
            + f"{index['postings_bytes'] / 1e6:.1f} MB, score rows {index['score_row_bytes'] / 1e6:.1f} MB).")


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
        (f"| lexical arm (top 50), warm (every term cached), after `VACUUM (ANALYZE)` | {pg['lexical_after_vacuum']['p50_ms']} / "
         f"{pg['lexical_after_vacuum']['p95_ms']} | {pg['sqlite_lexical']['p50_ms']} / {pg['sqlite_lexical']['p95_ms']} | "
         f"x{round(pg['lexical_after_vacuum']['p50_ms'] / pg['sqlite_lexical']['p50_ms'], 2)} |"),
        (f"| lexical arm, cold (first pass right after the load: each term's postings read on its first query; "
         f"with the whole load, the default, the first query reads every posting) | "
         f"{pg['lexical_after_load']['p50_ms']} / {pg['lexical_after_load']['p95_ms']} | | |"), "",
        (f"Lexical top 50 identical to SQLite's (ids and scores): {pg['identical_lexical_top50_vs_sqlite']}. "
         f"Vacuum after the load: {pg['vacuum_s']} s. Postings: {pg['postings_after_vacuum']['postings']:,}, "
         f"{pg['postings_after_vacuum']['bytes_per_posting']} bytes per posting (heap "
         f"{pg['postings_after_vacuum']['heap_bytes_per_posting']} + primary key "
         f"{pg['postings_after_vacuum']['index_bytes_per_posting']}) after the indexer's incremental load."
         + _index_line(pg.get("lexical_index"))),
    ]
    from postgres_new_queries import markdown as new_lines

    lines += ["", *new_lines(pg.get("new_queries"))]
    big = pg.get("scaled")
    if big:
        lines += ["", (f"At scale: SciFact copied {big['copies']}× into one collection ({big['chunks']:,} chunks, "
                       f"loaded in {big['load_s']} s by one INSERT, vacuumed in {big['vacuum_s']} s), first {big['queries']} queries, top 50:"), "",
                  "| lexical arm | p50 ms | p95 ms |", "| --- | --- | --- |",
                  f"| in process, warm (every term cached) | {big['lexical_warm']['p50_ms']} | {big['lexical_warm']['p95_ms']} |",
                  f"| in process, cold (one pass: each term's postings read on its first query) | {big['lexical_cold']['p50_ms']} | {big['lexical_cold']['p95_ms']} |",
                  (f"| in process, reload (cache dropped before each of {big['lexical_reload'].get('n', 20)} queries, as after a write: "
                   f"lengths + the query's postings) | {big['lexical_reload']['p50_ms']} | {big['lexical_reload']['p95_ms']} |"),
                  f"| the SQL statement before (d9f3a8a, pruned), same data | {big['lexical_sql_before']['p50_ms']} | {big['lexical_sql_before']['p95_ms']} |", "",
                  (f"First query after the load (lengths of every chunk + its terms): {big['lexical_first_query_ms']} ms. "
                   f"In-process top 50 identical to the old exhaustive statement's: {big['identical_in_process_vs_sql_exhaustive']}. "
                   f"Postings at this size: {big['postings']['bytes_per_posting']} bytes per posting (bulk-inserted)."
                   + _index_line(big.get("lexical_index"))), ""]
        if big.get("after_write"):
            from postgres_after_write import markdown as after_write_lines

            lines += [*after_write_lines(big["after_write"]), ""]
    return lines

