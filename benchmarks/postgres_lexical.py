"""Does the PostgreSQL lexical arm rank as well as the embedded store's BM25?

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/postgres_lexical.py
    PYTHONPATH=src .venv/bin/python benchmarks/postgres_lexical.py --dsn postgresql://…

Without ``--dsn`` (or ``PLAIT_PG_DSN``) a private PostgreSQL 16 + pgvector is started
with ``pgserver`` in a temporary folder and deleted afterwards; with a DSN the run
uses (and drops) its own schema. Data is read in place from ``../shared/data/scifact``
(BEIR: corpus.jsonl, queries.jsonl, qrels/test.tsv; 5,183 documents, 300 test
queries). Both stores index the corpus lexical-only (``--embedder none``): the same
chunks, the same analysed fields.

Rankers, all over the same corpus and the same analysed query terms (the exact field
without stopwords, as the search service sends them, plus the stems field):

* ``sqlite_bm25`` — the embedded store (:class:`plait.stores.sqlite.SQLiteStore`);
* ``postgres_bm25`` — :class:`plait.stores.postgres.PostgresStore`, BM25 in SQL over
  the postings table (schema version 3), after ``VACUUM ANALYZE`` (what autovacuum
  does on a live server: index-only scans); ``postgres_bm25_unvacuumed`` is the same
  right after indexing;
* ``postgres_bm25_tsvector`` — the store's previous lexical query (schema version 2),
  kept here as the "before": GIN candidates (``lex @@ tsquery``) whose ``lex``
  tsvectors are unnested per row, same statistics, same formula;
* ``postgres_ts_rank`` / ``postgres_ts_rank_cd`` — PostgreSQL's own ranking functions
  over the store's generated ``lex`` tsvector, same OR query;
* ``postgres_ts_rank_cd_content`` — the article's recipe: ``ts_rank_cd`` over
  ``to_tsvector('simple', content)`` with the query's ``simple`` words OR-ed.

The GIN index on ``lex`` that the tsvector rankers need is created by this script
(the store dropped it in schema version 3). Chunks are ranked (top 100) and mapped to
their document (the first chunk of a document gives its rank); nDCG@10, recall@100
and MRR@10 come from ``ir-measures``; ``identical_rankings_vs_sqlite`` counts the
queries whose ranked chunk ids and scores equal the embedded store's exactly.

Hybrid latency (skip with ``--no-hybrid``): the corpus is indexed again into a
second PostgreSQL collection with ``FakeEmbedder(dimension=384)`` vectors (feature
hashing: the HNSW index has SciFact's size and MiniLM's dimension, but the vectors
carry no meaning, so only latency is reported), and ``Plait.search(k=10)`` — both
arms over-fetching, fusion, chunk fetch — is timed over the 300 queries.

Results go to ``benchmarks/results/postgres_lexical.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.analysis import STOPWORDS, analyse_query
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.pg import private_postgres

DEPTH = 100
COLLECTION = "scifact"

Ranker = Callable[[str], list[tuple[str, float]]]


def load(data: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, score = line.split("\t")
        qrels.setdefault(qid, {})[doc] = int(score)
    queries: dict[str, str] = {}
    for line in (data / "queries.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["_id"] in qrels:
            queries[record["_id"]] = record["text"]
    return queries, qrels


def terms(query: str) -> tuple[list[str], list[str]]:
    analysed = analyse_query(query)
    exact = [t for t in analysed.exact if t not in STOPWORDS] or analysed.exact
    return exact, analysed.stems


def evaluate(
    name: str, rank: Ranker, queries: dict[str, str], qrels: dict[str, dict[str, int]],
    doc_of: dict[str, str], ranked_out: dict[str, list[tuple[str, float]]] | None = None,
) -> dict[str, Any]:
    import ir_measures
    from ir_measures import MRR, R, nDCG

    run: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    for qid, text in queries.items():
        started = time.perf_counter()
        ranked = rank(text)
        latencies.append((time.perf_counter() - started) * 1000)
        if ranked_out is not None:
            ranked_out[qid] = ranked
        docs: dict[str, float] = {}
        for position, (chunk_id, _score) in enumerate(ranked):
            docs.setdefault(doc_of[chunk_id], float(DEPTH * 10 - position))
        run[qid] = docs
    figures = ir_measures.calc_aggregate([nDCG @ 10, R @ 100, MRR @ 10], qrels, run)
    result = {
        "ndcg@10": round(figures[nDCG @ 10], 4),
        "recall@100": round(figures[R @ 100], 4),
        "mrr@10": round(figures[MRR @ 10], 4),
        "query_ms_median": round(statistics.median(latencies), 2),
        "query_ms_p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2),
    }
    print(f"{name:30s} {result}", flush=True)
    return result


_TSVECTOR_BM25 = """
WITH stats AS (
    SELECT n_chunks::float8 AS n,
           coalesce(nullif(len_exact_total::float8 / nullif(n_chunks, 0), 0), 1) AS avg_e,
           coalesce(nullif(len_stems_total::float8 / nullif(n_chunks, 0), 0), 1) AS avg_s
    FROM plait_collections WHERE name = %(c)s
), q AS (
    SELECT t.key, qt.field, ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf,
           CASE qt.field WHEN 0 THEN s.avg_e ELSE s.avg_s END AS avgdl
    FROM unnest(%(keys)s::text[], %(fields)s::int[]) AS qt(key, field)
    JOIN plait_collections p ON p.name = %(c)s
    JOIN plait_lex_terms t ON t.collection_id = p.id AND t.key = qt.key
    CROSS JOIN stats s WHERE t.df > 0
)
SELECT c.chunk_id,
       sum(q.idf * m.tf * 1.9 / (m.tf + 0.9 * (0.6 + 0.4
           * (CASE q.field WHEN 0 THEN c.len_exact ELSE c.len_stems END) / q.avgdl))) AS score
FROM plait_chunks c
JOIN plait_collections p ON p.id = c.collection_id AND p.name = %(c)s
CROSS JOIN LATERAL (
    SELECT x.lexeme, cardinality(x.positions)::float8 AS tf
    FROM unnest(ts_filter(setweight(c.lex, 'A', %(keys)s::text[]), '{a}')) AS x
) AS m
JOIN q ON q.key = m.lexeme
WHERE c.lex @@ %(tsq)s::tsquery
GROUP BY c.id, c.chunk_id
ORDER BY score DESC, c.id
LIMIT %(n)s
"""


def tsvector_bm25_ranker(store: PostgresStore, *, collection: str = COLLECTION) -> Ranker:
    """The store's lexical query before the postings table (default BM25Params)."""
    def rank(text: str) -> list[tuple[str, float]]:
        exact, stems = terms(text)
        keys = [f"e:{t}" for t in dict.fromkeys(exact)] + [f"s:{t}" for t in dict.fromkeys(stems)]
        fields = [0] * len(dict.fromkeys(exact)) + [1] * len(dict.fromkeys(stems))
        args = {"c": collection, "keys": keys, "fields": fields, "tsq": _tsquery(keys), "n": DEPTH}
        with store._tx() as conn:
            rows = conn.execute(_TSVECTOR_BM25, args).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    return rank


def ts_ranker(store: PostgresStore, function: str) -> Ranker:
    """``ts_rank`` / ``ts_rank_cd`` over the store's ``lex`` column (same keys, OR)."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT c.chunk_id FROM plait_chunks c JOIN plait_collections p ON p.id = c.collection_id "
        "WHERE p.name = %(c)s AND c.lex @@ %(q)s::tsquery "
        "ORDER BY {f}(c.lex, %(q)s::tsquery) DESC, c.id LIMIT %(n)s"
    ).format(f=sql.Identifier(function))

    def rank(text: str) -> list[tuple[str, float]]:
        exact, stems = terms(text)
        keys = [f"e:{t}" for t in dict.fromkeys(exact)] + [f"s:{t}" for t in dict.fromkeys(stems)]
        with store._tx() as conn:
            rows = conn.execute(query, {"c": COLLECTION, "q": _tsquery(keys), "n": DEPTH}).fetchall()
        return [(r[0], 0.0) for r in rows]

    return rank


def _tsquery(keys: Sequence[str]) -> str:
    """An OR tsquery of whole lexemes (quoted, so no parser ever splits them)."""
    quoted = ("'" + k.replace("\\", "\\\\").replace("'", "''") + "'" for k in keys)
    return " | ".join(quoted)


def content_ranker(store: PostgresStore) -> Ranker:
    """The article's recipe: ts_rank_cd over to_tsvector('simple', content), words OR-ed."""

    def rank(text: str) -> list[tuple[str, float]]:
        with store._tx() as conn:
            rows = conn.execute(
                "WITH q AS (SELECT nullif(replace(plainto_tsquery('simple', %(t)s)::text, "
                "' & ', ' | '), '')::tsquery AS q) "
                "SELECT c.chunk_id FROM plait_chunks c JOIN plait_collections p "
                "ON p.id = c.collection_id, q WHERE p.name = %(c)s "
                "AND to_tsvector('simple', c.content) @@ q.q "
                "ORDER BY ts_rank_cd(to_tsvector('simple', c.content), q.q) DESC, c.id LIMIT %(n)s",
                {"t": text, "c": COLLECTION, "n": DEPTH},
            ).fetchall()
        return [(r[0], 0.0) for r in rows]

    return rank


def machine() -> dict[str, Any]:
    import psycopg

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "psycopg": psycopg.__version__,
    }


def index(store: Any, corpus: Path) -> float:
    started = time.perf_counter()
    engine = Plait(store, embedder="none")
    report = engine.index(corpus, collection=COLLECTION)
    if report.chunks_added == 0:
        raise SystemExit(f"nothing indexed from {corpus}")
    return round(time.perf_counter() - started, 1)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--dsn", default=os.environ.get("PLAIT_PG_DSN"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_lexical.json")
    parser.add_argument("--no-hybrid", action="store_true", help="skip the hybrid latency run")
    parser.add_argument("--scale", type=int, default=10,
                        help="also time the lexical arm on a collection of SCALE copies of the "
                             "corpus (distinct ids; 1 skips)")
    parser.add_argument("--variants", metavar="SCHEMA:COLLECTION",
                        help="only time the lexical statement's variants (pruning_variants) on an existing "
                             "collection of the --dsn server (e.g. a SciFact copy left by an earlier run)")
    parser.add_argument("--queries", type=int, default=100, help="with --variants: the first N test queries")
    args = parser.parse_args(argv)

    queries, qrels = load(args.data)
    if args.variants:
        schema_name, _, collection = args.variants.partition(":")
        if not args.dsn or not collection:
            raise SystemExit("--variants needs --dsn and SCHEMA:COLLECTION")
        store = PostgresStore(args.dsn, schema=schema_name, statement_timeout=3600)
        figures = pruning_variants(store, collection, list(queries.values())[: args.queries])
        figures.update(date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), postgres=_server_version(store),
                       machine=machine())
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
        store.close()
        return
    corpus = args.data / "corpus.jsonl"
    workdir = Path(tempfile.mkdtemp(prefix="plait-bench-"))
    stack = ExitStack()
    dsn = args.dsn or stack.enter_context(private_postgres("plait-bench-pg-"))
    schema = f"plait_bench_{uuid.uuid4().hex[:8]}"
    with stack:
        sqlite_store = SQLiteStore(workdir / "plait.db")
        sqlite_index_s = index(sqlite_store, corpus)
        pg = PostgresStore(dsn, schema=schema, statement_timeout=300)
        pg_index_s = index(pg, corpus)
        chunks = dict(_chunk_docs(pg).items())
        print(f"indexed {len(chunks)} chunks: sqlite {sqlite_index_s}s, postgres {pg_index_s}s")

        def store_ranker(store: Any) -> Ranker:
            def rank(text: str) -> list[tuple[str, float]]:
                exact, stems = terms(text)
                hits: list[tuple[str, float]] = store.lexical_search(COLLECTION, exact, stems, limit=DEPTH)
                return hits

            return rank

        runs: dict[str, dict[str, list[tuple[str, float]]]] = {"sqlite_bm25": {}, "postgres_bm25": {}}
        results = {
            "sqlite_bm25": evaluate("sqlite_bm25", store_ranker(sqlite_store), queries, qrels, chunks,
                                    runs["sqlite_bm25"]),
            "postgres_bm25_unvacuumed": evaluate("postgres_bm25_unvacuumed", store_ranker(pg), queries,
                                                 qrels, chunks),
        }
        _settle(dsn, schema)
        rankers: dict[str, Ranker] = {
            "postgres_bm25": store_ranker(pg),
            "postgres_bm25_tsvector": tsvector_bm25_ranker(pg),
            "postgres_ts_rank": ts_ranker(pg, "ts_rank"),
            "postgres_ts_rank_cd": ts_ranker(pg, "ts_rank_cd"),
            "postgres_ts_rank_cd_content": content_ranker(pg),
        }
        for name, ranker in rankers.items():
            results[name] = evaluate(name, ranker, queries, qrels, chunks, runs.get(name))
        identical = sum(runs["postgres_bm25"][q] == runs["sqlite_bm25"][q] for q in queries)
        gap = round(results["sqlite_bm25"]["ndcg@10"] - results["postgres_bm25"]["ndcg@10"], 4)
        hybrid = None if args.no_hybrid else hybrid_latency(pg, corpus, queries)
        scaled = None if args.scale <= 1 else scaled_latency(pg, dsn, schema, args.scale, queries)
        payload = {
            "benchmark": "postgres_lexical",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "dataset": {"name": "scifact", "documents": len(set(chunks.values())), "chunks": len(chunks),
                        "queries": len(queries), "qrels": "test"},
            "depth": DEPTH,
            "index_seconds": {"sqlite": sqlite_index_s, "postgres": pg_index_s},
            "results": results,
            "ndcg@10_gap_sqlite_minus_postgres_bm25": gap,
            "identical_rankings_vs_sqlite": f"{identical}/{len(queries)}",
            "postgres_sizes": _sizes(pg),
            "hybrid_postgres": hybrid,
            "scaled_postgres": scaled,
            "postgres": _server_version(pg),
            "machine": machine(),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.out}")
        sqlite_store.close()
        with pg._tx() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        pg.close()


def _settle(dsn: str, schema: str) -> None:
    """What a live server has after indexing: autovacuum's VACUUM ANALYZE (visibility
    map, so postings are read index-only), plus the GIN index on ``lex`` that only the
    tsvector baselines read."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        conn.execute("CREATE INDEX IF NOT EXISTS plait_bench_lex ON plait_chunks USING gin (lex)")
        for table in ("plait_chunks", "plait_postings", "plait_lex_terms", "plait_collections"):
            conn.execute(f"VACUUM ANALYZE {table}")


def _sizes(store: PostgresStore) -> dict[str, str]:
    """On-disk sizes (heap + indexes + TOAST) of the lexical tables, measured at the end
    of the run: the whole benchmark schema, i.e. every collection indexed by then (with
    the hybrid and scaled runs: 1 + 1 + SCALE copies of the corpus)."""
    with store._tx() as conn:
        rows = conn.execute(
            "SELECT t, pg_size_pretty(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t",
            (["plait_chunks", "plait_postings", "plait_lex_terms"],),
        ).fetchall()
        gin = conn.execute("SELECT pg_size_pretty(pg_relation_size('plait_bench_lex'::regclass))").fetchone()
    sizes = {r[0]: r[1] for r in rows}
    sizes["gin_on_lex (benchmark only)"] = gin[0] if gin else "?"
    return sizes


def hybrid_latency(pg: PostgresStore, corpus: Path, queries: dict[str, str]) -> dict[str, Any]:
    """``Plait.search(k=10)`` latency on PostgreSQL with 384-d HNSW vectors (fake)."""
    from plait.embeddings.fake import FakeEmbedder

    name = COLLECTION + "_hybrid"
    engine = Plait(pg, embedder=FakeEmbedder(dimension=384))
    started = time.perf_counter()
    report = engine.index(corpus, collection=name)
    index_s = round(time.perf_counter() - started, 1)
    latencies: list[float] = []
    for text in queries.values():
        started = time.perf_counter()
        result = engine.search(text, collection=name, k=10)
        latencies.append((time.perf_counter() - started) * 1000)
        if not result.vector_available:
            raise SystemExit("hybrid run lost its vectors")
    figures = {
        "embedder": "FakeEmbedder(dimension=384): latency only, no quality",
        "chunks": report.chunks_added,
        "index_seconds": index_s,
        "search_ms_median": round(statistics.median(latencies), 2),
        "search_ms_p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2),
    }
    print(f"{'hybrid (postgres)':30s} {figures}", flush=True)
    return figures


def scaled_latency(
    pg: PostgresStore, dsn: str, schema: str, copies: int, queries: dict[str, str]
) -> dict[str, Any]:
    """Lexical latency on ``copies`` copies of the corpus in one collection (chunk ids
    suffixed ``#i``), written by SQL through the store's triggers, then settled."""
    name = f"{COLLECTION}_x{copies}"
    pg.ensure_collection(name)
    started = time.perf_counter()
    for i in range(copies):
        with pg._tx() as conn:
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) "
                "SELECT (SELECT id FROM plait_collections WHERE name = %(to)s), c.chunk_id || '#' || %(i)s, "
                "c.source_id || '#' || %(i)s, c.scope, c.ordinal, c.content, c.content_hash, c.origin, "
                "c.metadata, c.lex_exact, c.lex_stems FROM plait_chunks c JOIN plait_collections p "
                "ON p.id = c.collection_id AND p.name = %(from)s ORDER BY c.id",
                {"to": name, "from": COLLECTION, "i": str(i)},
            )
    copy_s = round(time.perf_counter() - started, 1)
    _settle(dsn, schema)
    sample = list(queries.values())[:100]
    latencies: dict[str, list[float]] = {"postgres_bm25": [], "postgres_bm25_tsvector": []}
    old = tsvector_bm25_ranker(pg, collection=name)
    for text in sample:
        exact, stems = terms(text)
        started = time.perf_counter()
        pg.lexical_search(name, exact, stems, limit=DEPTH)
        latencies["postgres_bm25"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        old(text)
        latencies["postgres_bm25_tsvector"].append((time.perf_counter() - started) * 1000)
    with pg._tx() as conn:
        row = conn.execute(
            "SELECT n_chunks FROM plait_collections WHERE name = %s", (name,)
        ).fetchone()
    figures: dict[str, Any] = {"chunks": int(row[0]) if row else 0, "queries": len(sample),
                               "copy_seconds": copy_s}
    for key, values in latencies.items():
        figures[key] = {"query_ms_median": round(statistics.median(values), 2),
                        "query_ms_p95": round(sorted(values)[int(0.95 * (len(values) - 1))], 2)}
    print(f"{'scaled x' + str(copies):30s} {figures}", flush=True)
    figures["variants"] = pruning_variants(pg, name, sample)
    return figures


#: Collections of at least this many chunks got the pruned statement (the store before
#: issue 26's in-process lexical arm, d9f3a8a).
PRUNE_FROM_CHUNKS = 50_000


def pruning_variants(
    pg: PostgresStore, name: str, queries: Sequence[str], *, limit: int = 50, passes: int = 2
) -> dict[str, Any]:
    """The lexical statement's variants on collection ``name``, side by side: each query
    runs every variant in turn (the order rotating query by query), ``passes`` times, all
    prepared on one pooled connection (generic plans, as the store runs them); the
    rescored top ``limit`` of every variant must be identical. Variants: ``before`` (the
    statement of 8cd1bac, frozen in ``postgres_lexical_v5.py``: schema-5 bounds, term-level
    MaxScore, every survivor probed for every non-essential term), ``exhaustive`` (every
    posting of every query term) and ``pruned`` (the store's statement: schema 8's
    max_tf + min len/tf bounds, the non-essential terms probed strongest first, candidates
    dropped between probes, after the best 4·``limit`` candidates were scored in full to
    raise the threshold) and ``pruned_no_topup`` (the same without that top-up)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import postgres_lexical_v5
    from plait.stores.base import BM25Params
    from postgres_lexical_sql import lexical_query, rescore

    params = BM25Params()
    info = pg.get_collection(name)
    # below PRUNE_FROM_CHUNKS the store sent the plain exhaustive statement (large=False)
    large = info is not None and info.chunks >= PRUNE_FROM_CHUNKS
    builders: dict[str, Callable[[int, list[str], list[str]], Any]] = {
        "before": lambda cid, e, s: postgres_lexical_v5.lexical_query(
            cid, e, s, limit=limit, filters=None, params=params, large=large),
        "exhaustive": lambda cid, e, s: lexical_query(cid, e, s, limit=limit, filters=None, params=params, prune=False),
        "pruned": lambda cid, e, s: lexical_query(cid, e, s, limit=limit, filters=None, params=params, large=large),
        "pruned_no_topup": lambda cid, e, s: lexical_query(
            cid, e, s, limit=limit, filters=None, params=params, large=large, topup=0),
    }
    names = list(builders)
    lat: dict[str, list[float]] = {k: [] for k in names}
    identical = 0
    load = [round(x, 1) for x in os.getloadavg()]
    with pg._read() as conn:
        cid = pg._collection(conn, name)[0]
        analysed = [terms(text) for text in queries]
        for e, st in analysed[:5]:  # prepare every variant's statement
            for build in builders.values():
                built = build(cid, e, st)
                if built is not None:
                    conn.execute(*built, prepare=True).fetchall()
        for rep in range(passes):
            for j, (e, st) in enumerate(analysed):
                results = {}
                for k in range(len(names)):
                    variant = names[(j + k + rep) % len(names)]
                    built = builders[variant](cid, e, st)
                    if built is None:
                        continue
                    started = time.perf_counter()
                    rows = conn.execute(*built, prepare=True).fetchall()
                    ranked = rescore(rows, e, st, limit=limit, params=params)
                    lat[variant].append((time.perf_counter() - started) * 1000)
                    results[variant] = ranked
                identical += len({json.dumps(r) for r in results.values()}) <= 1
    out: dict[str, Any] = {
        "collection": name, "chunks": pg.get_collection(name).chunks,  # type: ignore[union-attr]
        "queries": len(queries), "passes": passes, "limit": limit, "pruning_statement": large,
        "identical_top_k_all_variants": f"{identical}/{passes * len(queries)}",
        "load_average_start": load, "load_average_end": [round(x, 1) for x in os.getloadavg()],
    }
    for variant, values in lat.items():
        out[variant] = {"p50_ms": round(statistics.median(values), 2),
                        "p95_ms": round(sorted(values)[int(0.95 * (len(values) - 1))], 2)}
    out["speedup_p50_before_over_pruned"] = round(out["before"]["p50_ms"] / out["pruned"]["p50_ms"], 2)
    out["speedup_p50_exhaustive_over_pruned"] = round(out["exhaustive"]["p50_ms"] / out["pruned"]["p50_ms"], 2)
    print(f"{'pruning variants':30s} {out}", flush=True)
    return out


def _chunk_docs(store: PostgresStore) -> dict[str, str]:
    with store._tx() as conn:
        rows = conn.execute(
            "SELECT c.chunk_id, c.source_id FROM plait_chunks c JOIN plait_collections p "
            "ON p.id = c.collection_id WHERE p.name = %s",
            (COLLECTION,),
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def _server_version(store: PostgresStore) -> dict[str, str]:
    with store._tx() as conn:
        version = conn.execute("SELECT current_setting('server_version')").fetchone()
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return {"server": version[0] if version else "?", "pgvector": vector[0] if vector else "?"}


if __name__ == "__main__":
    main()
