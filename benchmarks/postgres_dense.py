"""The PostgreSQL store's in-process dense arm (issue 26): what loading the matrix costs,
what a round trip costs, and the in-process exact arm against pgvector's HNSW statement.

One private PostgreSQL (``pgserver``). For each size (default 9,121 chunks, SciFact's
count, and 100,000), a collection of random 384-d vectors is written server-side
(``generate_series``: no lexical fields, no HNSW index, so the write is quick) and the
matrix is loaded the way a search loads it (the store's ``_matrix``: the key, row ids
and chunk ids, then the vectors by binary ``COPY``, in one ``REPEATABLE READ``
transaction), several times (median), next to the variant not taken (the vectors
aggregated into one ``bytea`` row).

At SciFact size the dense arm alone is then timed both ways in one run, queries
interleaved: a store ranking in process (the default threshold) against one whose
``ann_threshold`` is 0 (pgvector HNSW, as before), after the HNSW index is built. The
round trip: ``SELECT 1`` and the collection check on a pooled connection.

    python benchmarks/postgres_dense.py [--sizes 9121,100000] [--queries 300]

Writes ``benchmarks/results/postgres_dense.{json,md}``. Wall-clock milliseconds: on a
shared machine read the ratios (labelled with the load).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DIM = 384
SCHEMA = "plait_dense_bench"

_FILL = (
    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
    "content_hash, origin, metadata, vector, lex_exact, lex_stems) "
    "SELECT %(cid)s, 'c' || g, 's' || (g / 10), 'docs', g, '', 'h' || g, '{}', '{}', "
    "(SELECT array_agg(random() - 0.5)::float4[] FROM generate_series(1, %(dim)s) WHERE g > 0)::vector, '', '' "
    "FROM generate_series(1, %(n)s) AS g"
)

#: Ten more chunks (row ids ``start``..``end``), as a small write does.
_ADD = _FILL.replace("generate_series(1, %(n)s)", "generate_series(%(start)s::int, %(end)s::int)")

#: The variant not taken: the vectors aggregated into one ``bytea`` row (as the lexical
#: loads read their lengths), fetched in binary.
_AGGREGATED = (
    "SELECT count(*), string_agg(substring(vector_send(c.vector) FROM 5), ''::bytea ORDER BY c.id) "
    "FROM plait_chunks c WHERE c.collection_id = %(cid)s AND c.vector IS NOT NULL"
)


def _pcts(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="9121,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--loads", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from plait.stores.postgres import PostgresStore
    from plait.stores.postgres_keys import CHECK, GENERATION
    from plait.stores.postgres_lexcache import READ_SNAPSHOT
    from plait.testing.pg import private_postgres

    sizes = [int(s) for s in args.sizes.split(",")]
    out: dict[str, Any] = {"dimension": DIM, "cpus": os.cpu_count(), "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    rng = np.random.default_rng(7)
    with private_postgres("plait-dense-bench-") as dsn:
        store = PostgresStore(dsn, schema=SCHEMA, vacuum_after=None)
        loads: dict[str, Any] = {}
        for n in sizes:
            name = f"c{n}"
            store.ensure_collection(name)
            with store._tx() as conn:
                cid = store._collection(conn, name)[0]
                t = time.perf_counter()
                conn.execute(_FILL, {"cid": cid, "dim": DIM, "n": n})
                fill_s = time.perf_counter() - t
            with store._read() as conn:
                conn.execute("VACUUM ANALYZE plait_chunks")
            times, aggregated = [], []
            for _ in range(args.loads):
                with store._read() as conn:
                    t = time.perf_counter()
                    found = store._matrix(conn, cid, (-1, -1), None, DIM, None)  # what a search runs
                    times.append((time.perf_counter() - t) * 1000)
                    assert isinstance(found, tuple)  # None: cached; a string: why it is not loaded
                    matrix = found[0]
                    t = time.perf_counter()
                    with conn.transaction():
                        conn.execute(READ_SNAPSHOT)
                        row = conn.execute(_AGGREGATED, {"cid": cid}, binary=True).fetchone()
                    assert row is not None
                    values = np.frombuffer(row[1], dtype=">f4").astype(np.float32).reshape(int(row[0]), DIM)
                    aggregated.append((time.perf_counter() - t) * 1000)
                    assert np.array_equal(values, matrix.matrix)
            advanced = []
            for i in range(args.loads):  # a write of 10 chunks, then the next search's load
                with store._tx() as conn:
                    conn.execute(_ADD, {"cid": cid, "dim": DIM, "start": n + 1 + 10 * i, "end": n + 10 * (i + 1)})
                with store._read() as conn:
                    row = conn.execute(GENERATION, (cid,)).fetchone()  # the key as the store reads it
                    assert row is not None
                    held = store._dense.get(cid)
                    assert held is not None
                    t = time.perf_counter()
                    found = store._matrix(conn, cid, (int(row[0]), int(row[1])), held, DIM, None)
                    advanced.append((time.perf_counter() - t) * 1000)
                    assert isinstance(found, tuple) and store.last_matrix_load == "changes"
                    assert found[0].rowids.size == n + 10 * (i + 1)
            loads[str(n)] = {
                "load_ms_median": round(float(np.median(times)), 1),
                "after_a_10_chunk_write_ms_median": round(float(np.median(advanced)), 1),
                "one_aggregated_row_ms_median": round(float(np.median(aggregated)), 1),
                "matrix_mb": round(matrix.matrix.nbytes / 2**20, 1),
                "write_s": round(fill_s, 1),
            }
            print(n, loads[str(n)], flush=True)
        out["matrix_load"] = loads
        trips: dict[str, list[float]] = {"select_1": [], "collection_check": []}
        with store._read() as conn:
            for _ in range(2000):
                for label, query, params in (
                    ("select_1", "SELECT 1", ()),
                    ("collection_check", CHECK, (f"c{sizes[0]}",)),
                ):
                    t = time.perf_counter()
                    conn.execute(query, params, prepare=True).fetchone()
                    trips[label].append((time.perf_counter() - t) * 1000)
            for _ in range(500):  # as inside a search: this process computed meanwhile
                spin = time.perf_counter() + 0.002
                while time.perf_counter() < spin:
                    pass
                t = time.perf_counter()
                conn.execute("SELECT 1", prepare=True).fetchone()
                trips.setdefault("select_1_after_2ms_of_python", []).append((time.perf_counter() - t) * 1000)
        out["round_trip"] = {k: _pcts(v) for k, v in trips.items()}
        name = f"c{sizes[0]}"
        store.set_embedder(name, provider="fake", model="random", dimension=DIM)  # builds the HNSW index
        exact = PostgresStore(dsn, schema=SCHEMA, vacuum_after=None)
        hnsw = PostgresStore(dsn, schema=SCHEMA, vacuum_after=None, ann_threshold=0)
        queries = rng.standard_normal((args.queries, DIM)).astype(np.float32)
        for s in (exact, hnsw):
            for q in queries[:20]:
                s.vector_search(name, q, limit=50)
        lat: dict[str, list[float]] = {"exact_in_process": [], "hnsw_sql": []}
        overlap = 0
        for q in queries:
            t = time.perf_counter()
            a = exact.vector_search(name, q, limit=50)
            lat["exact_in_process"].append((time.perf_counter() - t) * 1000)
            assert exact.last_vector_path == "exact"
            t = time.perf_counter()
            b = hnsw.vector_search(name, q, limit=50)
            lat["hnsw_sql"].append((time.perf_counter() - t) * 1000)
            assert hnsw.last_vector_path == "hnsw"
            overlap += len({i for i, _ in a[:10]} & {i for i, _ in b[:10]})
        out["dense_arm_at"] = sizes[0]
        out["dense_arm_limit"] = 50
        out["dense_arm"] = {k: _pcts(v) for k, v in lat.items()}
        out["hnsw_recall_at_10_vs_exact"] = round(overlap / (10 * len(queries)), 4)
        for s in (exact, hnsw, store):
            s.close()
    out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "postgres_dense.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    rows = [
        f"| {n} | {v['load_ms_median']} | {v['after_a_10_chunk_write_ms_median']} | {v['one_aggregated_row_ms_median']} "
        f"| {v['matrix_mb']} |"
        for n, v in loads.items()
    ]
    md = [
        "# PostgreSQL dense arm in process (issue 26)",
        "",
        f"`benchmarks/postgres_dense.py`, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; {DIM}-d random vectors, "
        f"{out['cpus']} CPUs, load average {out['load_average_start']} at the start, {out['load_average_end']} at the end "
        "(a shared machine: read the ratios).",
        "",
        "Loading a collection's matrix as a search does (one REPEATABLE READ transaction: the key, row and chunk ids "
        "in one pipeline, the vectors by binary COPY), and the variant not taken (the vectors aggregated into one "
        "bytea row, fetched in binary), and the load of the next search after a write of 10 chunks (advanced from the "
        f"change log: the added rows' vectors only); median of {args.loads}:",
        "",
        "| chunks | full load ms (COPY) | after a 10-chunk write ms (change log) | one aggregated row ms | matrix MB |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"A round trip on a pooled connection: `SELECT 1` p50 {out['round_trip']['select_1']['p50_ms']} ms, the "
        f"collection check p50 {out['round_trip']['collection_check']['p50_ms']} ms (back to back); `SELECT 1` after 2 ms "
        f"of Python work in this process (as between a search's statements) p50 "
        f"{out['round_trip']['select_1_after_2ms_of_python']['p50_ms']} / p95 "
        f"{out['round_trip']['select_1_after_2ms_of_python']['p95_ms']} ms.",
        "",
        f"The dense arm alone at {sizes[0]} chunks, limit 50, {len(queries)} queries interleaved: in process (exact) p50 "
        f"{out['dense_arm']['exact_in_process']['p50_ms']} ms / p95 {out['dense_arm']['exact_in_process']['p95_ms']}, "
        f"pgvector HNSW p50 {out['dense_arm']['hnsw_sql']['p50_ms']} ms / p95 {out['dense_arm']['hnsw_sql']['p95_ms']} "
        f"(HNSW top-10 overlap with the exact top-10: {out['hnsw_recall_at_10_vs_exact']}).",
        "",
    ]
    (RESULTS / "postgres_dense.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
