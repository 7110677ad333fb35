"""How large does the PostgreSQL postings table grow, and why?

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/postgres_postings_size.py
    PYTHONPATH=src .venv/bin/python benchmarks/postgres_postings_size.py --copies 3 --dsn postgresql://…

Without ``--dsn`` (or ``PLAIT_PG_DSN``) a private PostgreSQL 16 + pgvector is started
with ``pgserver`` in a temporary folder and deleted afterwards; with a DSN every
schema the run makes is dropped at the end. The SciFact corpus is read in place
(``../shared/data/scifact/corpus.jsonl``, 5,183 documents → 9,121 chunks) and
indexed lexical-only (``embedder="none"``: nothing downloads), ``--copies`` times
with distinct source ids.

Each schema version given with ``--versions`` (default: 3, the postings as migration
3 made them, and the latest) is measured in its own schema, side by side in one run:

a. **bulk** — the chunk rows are copied into a fresh schema at version 2 in one
   ``INSERT … SELECT``, then the store migrates it: the postings are built by the
   migrations' backfill, sorted, the way an upgraded database gets them;
b. **incremental** — plait's normal path: ``Plait.index_documents`` in batches of
   ``--batch`` documents, one ``replace_source`` transaction per document, whose
   triggers insert the postings;
c. **vacuumed** — after ``VACUUM ANALYZE`` of the chunk, term and postings tables
   (what autovacuum would do; it is also reported whether autovacuum ran by itself);
d. **changed** — ``--changed`` of the sources edited (a sentence appended, so their
   chunks are deleted and inserted again) and reindexed the same way; then
e. **changed+vacuumed**.

At each step: ``pg_table_size`` (heap + TOAST + maps), ``pg_indexes_size``,
``pg_total_relation_size``, the TOAST relation's own size, live / dead tuples from
``pg_stat_user_tables``, the postings count and bytes per posting, and the median /
p95 latency of the store's lexical arm (``lexical_search``, top 100) over SciFact's
300 test queries, with the number of queries whose ranking equals the bulk step's.

Then **g** — ``REINDEX TABLE plait_postings``. And (skip with ``--no-layouts``) the
bulk step's postings are rebuilt in other row layouts (:data:`LAYOUTS`: integer
collection id, integer term id, a ``(collection_id, key)`` key in heap order), each
bulk-sorted and replayed chunk by chunk into its indexes, next to the size of a GIN
index on ``lex`` (schema version 2's index).

Results: ``benchmarks/results/postgres_postings_size.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import psycopg
from psycopg import sql

import plait.stores.postgres_base as postgres_module  # where the store calls migrate
from plait.analysis import STOPWORDS, analyse_query
from plait.evaluation.runner import machine_info
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.sources.jsonl import JsonlSource
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_schema import LATEST_VERSION, migrate
from plait.testing.pg import private_postgres

COLLECTION = "scifact"
DEPTH = 100
TABLES = ("plait_chunks", "plait_postings", "plait_lex_terms")
CHUNK_COLUMNS = (
    "chunk_id, source_id, scope, ordinal, content, content_hash, origin, metadata, vector, "
    "lex_exact, lex_stems"
)


@contextmanager
def pinned_version(version: int) -> Iterator[None]:
    """Stores opened inside migrate only up to ``version`` (to measure older layouts
    next to the latest in one run)."""
    with mock.patch.object(postgres_module, "migrate", functools.partial(migrate, target=version)):
        yield


def documents(corpus: Path, copies: int, *, edited: set[str] | None = None) -> Iterator[SourceDocument]:
    """The corpus ``copies`` times (source ids suffixed ``#i`` after the first copy);
    with ``edited``, only those source ids, each with one sentence appended."""
    for i in range(copies):
        for doc in JsonlSource(path=corpus).scan():
            source_id = doc.source_id if i == 0 else f"{doc.source_id}#{i}"
            if edited is not None and source_id not in edited:
                continue
            parts = doc.parts
            if edited is not None:
                part = parts[0]
                parts = (SourcePart(text=part.text + "\n\nThis finding was revised in 2024.",
                                    origin=part.origin, markdown=part.markdown, key=part.key),)
            yield SourceDocument(source_id=source_id, scope=doc.scope, parts=parts, metadata=doc.metadata)


def batched(items: Iterator[SourceDocument], size: int) -> Iterator[list[SourceDocument]]:
    batch: list[SourceDocument] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def index_incrementally(engine: Plait, docs: Iterator[SourceDocument], batch: int) -> tuple[int, float]:
    """``index_documents`` per batch (one ``replace_source`` per document); (chunks
    written, seconds)."""
    written = 0
    started = time.perf_counter()
    for group in batched(docs, batch):
        report = engine.index_documents(group, collection=COLLECTION)
        written += report.chunks_added + report.chunks_updated
    return written, round(time.perf_counter() - started, 1)


def load_queries(data: Path) -> list[tuple[list[str], list[str]]]:
    """SciFact's test queries analysed as the search service sends them."""
    wanted = {line.split("\t")[0] for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    out: list[tuple[list[str], list[str]]] = []
    for line in (data / "queries.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["_id"] in wanted:
            analysed = analyse_query(record["text"])
            exact = [t for t in analysed.exact if t not in STOPWORDS] or analysed.exact
            out.append((exact, analysed.stems))
    return out


def latency(store: PostgresStore, queries: Sequence[tuple[list[str], list[str]]]) -> tuple[dict[str, float], list[Any]]:
    """Median / p95 ms of the lexical arm (top 100) and the rankings."""
    for exact, stems in queries[:20]:  # warm the cache
        store.lexical_search(COLLECTION, exact, stems, limit=DEPTH)
    times: list[float] = []
    rankings: list[Any] = []
    for exact, stems in queries:
        started = time.perf_counter()
        rankings.append(store.lexical_search(COLLECTION, exact, stems, limit=DEPTH))
        times.append((time.perf_counter() - started) * 1000)
    ordered = sorted(times)
    return {
        "query_ms_median": round(statistics.median(times), 2),
        "query_ms_p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
    }, rankings


def sizes(dsn: str, schema: str) -> dict[str, Any]:
    """Sizes (bytes) and tuple counts of the lexical tables of ``schema``."""
    time.sleep(1.0)  # let the backends flush their table statistics
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        for table in TABLES:
            row = conn.execute(
                "SELECT pg_table_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid), "
                "coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0), pg_relation_size(c.oid), "
                "s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.autoanalyze_count "
                "FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid "
                "WHERE c.oid = %s::regclass",
                (table,),
            ).fetchone()
            assert row is not None
            indexes = conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
                "WHERE indrelid = %s::regclass ORDER BY 1",
                (table,),
            ).fetchall()
            out[table] = {
                "table_bytes": row[0], "indexes_bytes": row[1], "total_bytes": row[2],
                "toast_bytes": row[3], "heap_bytes": row[4], "live_tuples": row[5],
                "dead_tuples": row[6], "autovacuum_count": row[7], "autoanalyze_count": row[8],
                "index_bytes": {r[0].split(".")[-1]: r[1] for r in indexes},
            }
        count = conn.execute("SELECT count(*) FROM plait_postings").fetchone()
        chunks = conn.execute("SELECT count(*) FROM plait_chunks").fetchone()
    postings = int(count[0]) if count else 0
    p = out["plait_postings"]
    out["postings"] = postings
    out["chunks"] = int(chunks[0]) if chunks else 0
    out["bytes_per_posting"] = {
        "heap": round(p["heap_bytes"] / max(postings, 1), 1),
        "indexes": round(p["indexes_bytes"] / max(postings, 1), 1),
        "total": round(p["total_bytes"] / max(postings, 1), 1),
    }
    return out


def vacuum(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        for table in TABLES:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))


def bulk_copy(dsn: str, source_schema: str, schema: str, version: int) -> float:
    """Copy ``source_schema``'s chunk rows into a fresh ``schema`` at version 2 in one
    statement, then migrate it to ``version``: the postings come from the backfill."""
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        migrate(conn, target=2)
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "INSERT INTO plait_collections (name, provider, model, dimension, settings, created_at) "
                    "SELECT name, provider, model, dimension, settings, created_at FROM {}.plait_collections"
                ).format(sql.Identifier(source_schema))
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO plait_chunks (collection_id, " + CHUNK_COLUMNS + ") "
                    "SELECT n.id, " + ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(",")) + " "
                    "FROM {s}.plait_chunks c JOIN {s}.plait_collections o ON o.id = c.collection_id "
                    "JOIN plait_collections n ON n.name = o.name ORDER BY c.id"
                ).format(s=sql.Identifier(source_schema))
            )
        conn.execute("SET statement_timeout = 0")
        migrate(conn, target=version)
    return round(time.perf_counter() - started, 1)


#: Other row layouts for the same postings: (name, columns, the SELECT filling them
#: from ``plait_postings`` joined to a per-collection term dictionary ``d``, indexes).
LAYOUTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("v3: text key, bigint collection (as stored)",
     "collection_id bigint, key text, chunk_row bigint, tf integer, len integer",
     "p.collection_id, p.key, p.chunk_row, p.tf, p.len",
     ("UNIQUE (collection_id, key, chunk_row) INCLUDE (tf, len)",)),
    ("integer collection id",
     "collection_id integer, key text, chunk_row bigint, tf integer, len integer",
     "p.collection_id, p.key, p.chunk_row, p.tf, p.len",
     ("UNIQUE (collection_id, key, chunk_row) INCLUDE (tf, len)",)),
    ("integer term id (dictionary in plait_lex_terms)",
     "collection_id integer, term integer, chunk_row bigint, tf integer, len integer",
     "p.collection_id, d.term, p.chunk_row, p.tf, p.len",
     ("UNIQUE (collection_id, term, chunk_row) INCLUDE (tf, len)",)),
    ("bigint term id, no collection column",
     "term bigint, chunk_row bigint, tf integer, len integer",
     "d.term, p.chunk_row, p.tf, p.len",
     ("UNIQUE (term, chunk_row) INCLUDE (tf, len)",)),
    ("text key, (collection, key) + heap order, delete index on chunk_row",
     "collection_id bigint, key text, chunk_row bigint, tf integer, len integer",
     "p.collection_id, p.key, p.chunk_row, p.tf, p.len",
     ("INDEX (collection_id, key) INCLUDE (chunk_row, tf, len)", "INDEX (chunk_row)")),
)


def layouts(dsn: str, schema: str) -> dict[str, Any]:
    """Bytes per posting of :data:`LAYOUTS`, each filled twice from ``schema``'s
    postings: *bulk* (rows sorted, indexes built afterwards, as a migration's backfill)
    and *incremental* (indexes first, rows inserted chunk by chunk, the order the
    triggers write them). Plus the GIN index on ``lex`` the store dropped."""
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("SET statement_timeout = 0")
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute(
            "CREATE TABLE bench_terms AS SELECT key, collection_id, "
            "(row_number() OVER (ORDER BY collection_id, key))::integer AS term FROM plait_lex_terms"
        )
        conn.execute("CREATE UNIQUE INDEX ON bench_terms (collection_id, key)")
        count = conn.execute("SELECT count(*) FROM plait_postings").fetchone()
        postings = int(count[0]) if count else 1
        for name, columns, select, indexes in LAYOUTS:
            figures: dict[str, Any] = {}
            for mode in ("bulk", "incremental"):
                conn.execute("DROP TABLE IF EXISTS bench_layout")
                conn.execute(sql.SQL("CREATE TABLE bench_layout ({})").format(sql.SQL(columns)))
                make = [
                    sql.SQL("CREATE {} ON bench_layout {}").format(
                        sql.SQL("UNIQUE INDEX" if ix.startswith("UNIQUE") else "INDEX"),
                        sql.SQL(ix.split(" ", 1)[1]),
                    )
                    for ix in indexes
                ]
                order = "p.collection_id, p.key, p.chunk_row" if mode == "bulk" else "p.chunk_row, p.key"
                fill = sql.SQL(
                    "INSERT INTO bench_layout SELECT {} FROM plait_postings p JOIN bench_terms d "
                    "ON d.collection_id = p.collection_id AND d.key = p.key ORDER BY {}"
                ).format(sql.SQL(select), sql.SQL(order))
                started = time.perf_counter()
                if mode == "incremental":
                    for statement in make:
                        conn.execute(statement)
                conn.execute(fill)
                if mode == "bulk":
                    for statement in make:
                        conn.execute(statement)
                seconds = round(time.perf_counter() - started, 1)
                row = conn.execute(
                    "SELECT pg_table_size('bench_layout'), pg_indexes_size('bench_layout')"
                ).fetchone()
                assert row is not None
                figures[mode] = {
                    "seconds": seconds,
                    "heap_bytes_per_posting": round(row[0] / postings, 1),
                    "index_bytes_per_posting": round(row[1] / postings, 1),
                    "total_bytes_per_posting": round((row[0] + row[1]) / postings, 1),
                }
            out[name] = figures
            print(f"layout {name}: {figures}", flush=True)
        conn.execute("DROP TABLE bench_layout")
        conn.execute("DROP TABLE bench_terms")
        conn.execute("CREATE INDEX bench_gin ON plait_chunks USING gin (lex)")
        gin = conn.execute("SELECT pg_relation_size('bench_gin')").fetchone()
        conn.execute("DROP INDEX bench_gin")
    out["gin on plait_chunks.lex (v2, dropped by v3)"] = {
        "bulk": {"index_bytes_per_posting": round((gin[0] if gin else 0) / postings, 1)}
    }
    return out


def same(a: list[Any], b: list[Any]) -> int:
    return sum(x == y for x, y in zip(a, b, strict=True))


def run_version(dsn: str, version: int, args: argparse.Namespace,
                queries: Sequence[tuple[list[str], list[str]]]) -> dict[str, Any]:
    """Steps (a)–(e) for stores at schema ``version``."""
    tag = uuid.uuid4().hex[:8]
    inc_schema, bulk_schema = f"plait_size_v{version}_{tag}", f"plait_bulk_v{version}_{tag}"
    corpus = args.data / "corpus.jsonl"
    steps: dict[str, Any] = {}
    with pinned_version(version):
        store = PostgresStore(dsn, schema=inc_schema, statement_timeout=600)
        engine = Plait(store, embedder="none")
        chunks, seconds = index_incrementally(engine, documents(corpus, args.copies), args.batch)
        print(f"v{version}: indexed {chunks} chunks incrementally in {seconds}s", flush=True)
        incremental_sizes = sizes(dsn, inc_schema)
        incremental_latency, incremental_rankings = latency(store, queries)

        bulk_seconds = bulk_copy(dsn, inc_schema, bulk_schema, version)
        bulk_store = PostgresStore(dsn, schema=bulk_schema, statement_timeout=600)
        vacuum(dsn, bulk_schema)  # its postings were built by one statement: only visibility
        steps["a_bulk"] = {"seconds": bulk_seconds, **sizes(dsn, bulk_schema)}
        steps["a_bulk"]["latency"], reference = latency(bulk_store, queries)
        bulk_store.close()
        if args.layouts:
            steps["layouts"] = layouts(dsn, bulk_schema)
        print(f"v{version}: bulk {steps['a_bulk']['bytes_per_posting']} {steps['a_bulk']['latency']}", flush=True)

        steps["b_incremental"] = {"seconds": seconds, **incremental_sizes, "latency": incremental_latency,
                                  "identical_rankings_vs_bulk": same(incremental_rankings, reference)}
        vacuum(dsn, inc_schema)
        steps["c_vacuumed"] = sizes(dsn, inc_schema)
        steps["c_vacuumed"]["latency"], ranked = latency(store, queries)
        steps["c_vacuumed"]["identical_rankings_vs_bulk"] = same(ranked, reference)

        every = max(1, round(1 / args.changed)) if args.changed > 0 else 0
        sources = [d.source_id for d in documents(corpus, args.copies)]
        edited = set(sources[::every]) if every else set()
        written, seconds = index_incrementally(engine, documents(corpus, args.copies, edited=edited), args.batch)
        steps["d_changed"] = {"sources_changed": len(edited), "chunks_rewritten": written,
                              "seconds": seconds, **sizes(dsn, inc_schema)}
        steps["d_changed"]["latency"], _ = latency(store, queries)
        vacuum(dsn, inc_schema)
        steps["e_changed_vacuumed"] = sizes(dsn, inc_schema)
        steps["e_changed_vacuumed"]["latency"], _ = latency(store, queries)
        # A second round, on other sources, into the space the vacuum freed.
        edited = set(sources[every // 2::every]) if every else set()
        written, seconds = index_incrementally(engine, documents(corpus, args.copies, edited=edited), args.batch)
        vacuum(dsn, inc_schema)
        steps["f_changed_again_vacuumed"] = {"sources_changed": len(edited), "chunks_rewritten": written,
                                             "seconds": seconds, **sizes(dsn, inc_schema)}
        steps["f_changed_again_vacuumed"]["latency"], _ = latency(store, queries)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(inc_schema)))
            started = time.perf_counter()
            conn.execute("REINDEX TABLE plait_postings")
            reindex_seconds = round(time.perf_counter() - started, 1)
        steps["g_reindexed"] = {"seconds": reindex_seconds, **sizes(dsn, inc_schema)}
        steps["g_reindexed"]["latency"], _ = latency(store, queries)
        for name in ("b_incremental", "c_vacuumed", "d_changed", "e_changed_vacuumed",
                     "f_changed_again_vacuumed", "g_reindexed"):
            print(f"v{version}: {name} {steps[name]['bytes_per_posting']} {steps[name]['latency']}", flush=True)
        store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in (inc_schema, bulk_schema):
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return steps


def server_info(dsn: str) -> dict[str, str]:
    """The server's version and vacuum settings (pgvector goes to ``public`` first, so
    every schema of the run sees it and dropping a schema never drops it)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
            (["server_version", "autovacuum", "autovacuum_naptime", "autovacuum_vacuum_insert_threshold",
              "autovacuum_vacuum_scale_factor", "shared_buffers", "work_mem", "block_size"],),
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def mb(value: int) -> str:
    return f"{value / 1048576:.1f}"


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "# PostgreSQL postings size",
        "",
        (
            f"`benchmarks/postgres_postings_size.py`, {payload['date']}: SciFact × {payload['copies']} "
            f"(lexical only), PostgreSQL {payload['server'].get('server_version', '?')} "
            f"(autovacuum {payload['server'].get('autovacuum', '?')}), "
            f"{payload['machine']['cpu']} × {payload['machine']['cores']}, "
            f"Python {payload['machine']['python']}. Sizes in MB; bytes per posting = bytes / postings "
            "rows; latency = the store's lexical arm, top 100, SciFact's 300 test queries (medians, "
            "all measured in this one run)."
        ),
        "",
        (
            "| schema | step | chunks | postings | postings heap | postings indexes | postings total "
            "| B/posting (heap + idx) | dead tuples | chunks total | median ms | p95 ms |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for version, steps in payload["versions"].items():
        for step, s in steps.items():
            if step == "layouts":
                continue
            p = s["plait_postings"]
            bpp = s["bytes_per_posting"]
            lines.append(
                f"| v{version} | {step} | {s['chunks']:,} | {s['postings']:,} | {mb(p['table_bytes'])} "
                f"| {mb(p['indexes_bytes'])} | {mb(p['total_bytes'])} | {bpp['heap']} + {bpp['indexes']} "
                f"| {p['dead_tuples']:,} | {mb(s['plait_chunks']['total_bytes'])} "
                f"| {s['latency']['query_ms_median']} | {s['latency']['query_ms_p95']} |"
            )
    for version, steps in payload["versions"].items():
        if "layouts" not in steps:
            continue
        lines += [
            "",
            (
                f"Row layouts for the same {steps['a_bulk']['postings']:,} postings (v{version}'s bulk "
                "step), bytes per posting, heap + indexes:"
            ),
            "",
            "| layout | bulk (sorted, indexes built after) | incremental (chunk by chunk into the indexes) |",
            "| --- | --- | --- |",
        ]
        for name, figures in steps["layouts"].items():
            cells = []
            for mode in ("bulk", "incremental"):
                f = figures.get(mode)
                if f is None:
                    cells.append("–")
                elif "heap_bytes_per_posting" in f:
                    cells.append(f"{f['heap_bytes_per_posting']} + {f['index_bytes_per_posting']} = "
                                 f"**{f['total_bytes_per_posting']}**")
                else:
                    cells.append(f"index only: **{f['index_bytes_per_posting']}**")
            lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--dsn", default=os.environ.get("PLAIT_PG_DSN"))
    parser.add_argument("--copies", type=int, default=1, help="index the corpus this many times")
    parser.add_argument("--batch", type=int, default=500, help="documents per index_documents call")
    parser.add_argument("--changed", type=float, default=0.1, help="share of sources edited in step d")
    parser.add_argument("--versions", type=int, nargs="+", default=sorted({3, LATEST_VERSION}),
                        help="schema versions to measure side by side (3 or later)")
    parser.add_argument("--no-layouts", dest="layouts", action="store_false",
                        help="skip the alternative row layouts")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_postings_size.json")
    args = parser.parse_args(argv)

    queries = load_queries(args.data)
    stack = ExitStack()
    dsn = args.dsn or stack.enter_context(private_postgres("plait-size-"))
    with stack:
        payload: dict[str, Any] = {
            "benchmark": "postgres_postings_size",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "dataset": "scifact corpus.jsonl", "copies": args.copies, "batch": args.batch,
            "queries": len(queries), "server": server_info(dsn), "machine": machine_info(),
            "versions": {},
        }
        for version in args.versions:
            payload["versions"][str(version)] = run_version(dsn, version, args, queries)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown(payload))
        print(f"wrote {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
