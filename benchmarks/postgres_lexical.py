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
* ``postgres_bm25`` — :class:`plait.stores.postgres.PostgresStore`, BM25 in SQL;
* ``postgres_ts_rank`` / ``postgres_ts_rank_cd`` — PostgreSQL's own ranking functions
  over the store's generated ``lex`` tsvector and GIN index, same OR query;
* ``postgres_ts_rank_cd_content`` — the article's recipe: ``ts_rank_cd`` over
  ``to_tsvector('simple', content)`` with the query's ``simple`` words OR-ed.

Chunks are ranked (top 100) and mapped to their document (the first chunk of a
document gives its rank); nDCG@10, recall@100 and MRR@10 come from ``ir-measures``.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.analysis import STOPWORDS, analyse_query
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore

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
    doc_of: dict[str, str],
) -> dict[str, Any]:
    import ir_measures
    from ir_measures import MRR, R, nDCG

    run: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    for qid, text in queries.items():
        started = time.perf_counter()
        ranked = rank(text)
        latencies.append((time.perf_counter() - started) * 1000)
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


def ts_ranker(store: PostgresStore, function: str) -> Ranker:
    """``ts_rank`` / ``ts_rank_cd`` over the store's ``lex`` column (same keys, OR)."""
    from psycopg import sql

    from plait.stores.postgres_queries import tsquery as _tsquery

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
    args = parser.parse_args(argv)

    queries, qrels = load(args.data)
    corpus = args.data / "corpus.jsonl"
    workdir = Path(tempfile.mkdtemp(prefix="plait-bench-"))
    server = None
    dsn = args.dsn
    if not dsn:
        import pgserver

        server = pgserver.get_server(workdir / "pg", cleanup_mode="delete")
        dsn = server.get_uri()
    schema = f"plait_bench_{uuid.uuid4().hex[:8]}"
    try:
        sqlite_store = SQLiteStore(workdir / "plait.db")
        sqlite_index_s = index(sqlite_store, corpus)
        pg = PostgresStore(dsn, schema=schema, statement_timeout=300)
        pg_index_s = index(pg, corpus)
        chunks = {c: s for c, s in _chunk_docs(pg).items()}
        print(f"indexed {len(chunks)} chunks: sqlite {sqlite_index_s}s, postgres {pg_index_s}s")

        def store_ranker(store: Any) -> Ranker:
            def rank(text: str) -> list[tuple[str, float]]:
                exact, stems = terms(text)
                return store.lexical_search(COLLECTION, exact, stems, limit=DEPTH)

            return rank

        rankers: dict[str, Ranker] = {
            "sqlite_bm25": store_ranker(sqlite_store),
            "postgres_bm25": store_ranker(pg),
            "postgres_ts_rank": ts_ranker(pg, "ts_rank"),
            "postgres_ts_rank_cd": ts_ranker(pg, "ts_rank_cd"),
            "postgres_ts_rank_cd_content": content_ranker(pg),
        }
        results = {name: evaluate(name, r, queries, qrels, chunks) for name, r in rankers.items()}
        gap = round(results["sqlite_bm25"]["ndcg@10"] - results["postgres_bm25"]["ndcg@10"], 4)
        payload = {
            "benchmark": "postgres_lexical",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "dataset": {"name": "scifact", "documents": len(set(chunks.values())), "chunks": len(chunks),
                        "queries": len(queries), "qrels": "test"},
            "depth": DEPTH,
            "index_seconds": {"sqlite": sqlite_index_s, "postgres": pg_index_s},
            "results": results,
            "ndcg@10_gap_sqlite_minus_postgres_bm25": gap,
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
    finally:
        if server is not None:
            server.cleanup()


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
