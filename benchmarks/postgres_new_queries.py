"""Hybrid search with queries the process has not seen, PostgreSQL against SQLite (issue 26).

Part of the PostgreSQL section of ``benchmarks/run_all.py`` (``postgres_speed.run`` calls
:func:`measure` on the collection it indexed). Three engines opened afresh on the same
data, so no query of the timed pass has been searched by the process before: PostgreSQL
with the default ``whole_bytes`` (the collection read whole on its first search:
``plait.stores.postgres_whole``), PostgreSQL with ``whole_bytes=0`` (postings read per
term, chunk rows per hit), and the SQLite store. Each first searches ``warm`` queries
(the whole load happens there, timed apart), then the other queries are timed once each,
interleaved query by query, the engine that goes first rotating (*new*), then the same queries again (*repeated*). The round
trips of new queries are counted on two more fresh PostgreSQL engines (counting slows a
search, so not in the timed pass) as ``postgres_trips`` counts them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ENGINES = ("pg_whole", "pg_per_term", "sqlite")


def _pcts(values: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p95_ms": round(float(np.percentile(values, 95)), 3)}


def _timed(engines: dict[str, Any], texts: Sequence[str], collection: str) -> dict[str, dict[str, float]]:
    lat: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for i, q in enumerate(texts):
        # the engine that goes first rotates: the later ones get the hits' snippet texts from
        # the process-wide cache the first filled (plait.snippets), and a fixed order made
        # the first engine pay every new text's analysis
        for name in names[i % len(names):] + names[: i % len(names)]:
            engine = engines[name]
            t = time.perf_counter()
            engine.search(q, collection=collection, k=10)
            lat[name].append((time.perf_counter() - t) * 1000)
    return {name: _pcts(values) for name, values in lat.items()}


def measure(
    dsn: str, schema: str, lite_db: Path, texts: Sequence[str], make_embedder: Callable[[], Any], *,
    collection: str, warm: int = 20, counted: int = 60,
) -> dict[str, Any]:
    """See the module's docstring; ``lite_db`` holds the same collection as ``schema``."""
    from plait.service import Plait
    from plait.stores.postgres import PostgresStore
    from postgres_trips import _count_trips

    def pg(whole_bytes: int | None) -> Any:
        if whole_bytes is None:  # the default
            return Plait(PostgresStore(dsn, schema=schema, vacuum_after=None), embedder=make_embedder())
        store = PostgresStore(dsn, schema=schema, vacuum_after=None, whole_bytes=whole_bytes)
        return Plait(store, embedder=make_embedder())

    out: dict[str, Any] = {"load_average_start": [round(x, 1) for x in os.getloadavg()], "warm_queries": warm}
    engines = {"pg_whole": pg(None), "pg_per_term": pg(0), "sqlite": Plait(str(lite_db), embedder=make_embedder())}
    try:
        first: dict[str, float] = {}
        for name, engine in engines.items():
            t = time.perf_counter()
            engine.search(texts[0], collection=collection, k=10)
            first[name] = round((time.perf_counter() - t) * 1000, 1)
            for q in texts[1:warm]:
                engine.search(q, collection=collection, k=10)
        out["first_search_ms"] = first
        timed = texts[warm:]
        out["timed_queries"] = len(timed)
        out["new"] = _timed(engines, timed, collection)
        out["repeated"] = _timed(engines, timed, collection)
        store = engines["pg_whole"].store
        held = store._lexicon.get(store._known[collection][0])
        whole = None if held is None else held[1].whole
        out["whole_memory_mb"] = {
            "postings": round((whole.nbytes if whole is not None else 0) / 1e6, 1),
            "rows": round(store._rows.bytes / 1e6, 1),
            "dense_matrix": round(store._dense.bytes / 1e6, 1),
        }
        out["whole_postings"] = 0 if whole is None else int(whole.positions.size)
        out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    finally:
        for engine in engines.values():
            engine.close()
    trips: dict[str, float] = {}
    for name, whole_bytes in (("pg_whole", None), ("pg_per_term", 0)):
        with pg(whole_bytes) as engine:
            for q in texts[:warm]:
                engine.search(q, collection=collection, k=10)
            counts = [_count_trips(engine, q) for q in texts[warm:warm + counted]]
        trips[name] = round(float(np.mean(counts)), 2)
    out["round_trips_per_new_query"] = trips
    out["counted_queries"] = len(texts[warm:warm + counted])
    return out


def markdown(new: dict[str, Any] | None) -> list[str]:
    if not new or "new" not in new:
        return []
    label = {"pg_whole": "PostgreSQL, whole load (default `whole_bytes`)",
             "pg_per_term": "PostgreSQL, `whole_bytes=0` (per term / per hit)", "sqlite": "SQLite store"}
    sqlite = new["new"]["sqlite"]["p50_ms"]
    lines = [
        (f"New queries (engines opened afresh, {new['warm_queries']} warm-up queries each, then {new['timed_queries']} "
         f"queries the process has not searched, interleaved; load average {new['load_average_start']} at the start, "
         f"{new['load_average_end']} at the end):"), "",
        "| engine | new p50 / p95 ms | ratio to SQLite (new p50) | repeated p50 / p95 ms | round trips per new query | first search ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in ENGINES:
        n, r = new["new"][name], new["repeated"][name]
        trips = new["round_trips_per_new_query"].get(name, "")
        lines.append(f"| {label[name]} | {n['p50_ms']} / {n['p95_ms']} | x{round(n['p50_ms'] / sqlite, 2)} | "
                     f"{r['p50_ms']} / {r['p95_ms']} | {trips} | {new['first_search_ms'][name]} |")
    mem = new["whole_memory_mb"]
    lines += ["", (f"The whole load holds {new['whole_postings']:,} postings ({mem['postings']} MB), the chunk rows "
                   f"({mem['rows']} MB, as the row cache counts them) and the dense matrix ({mem['dense_matrix']} MB); "
                   f"round trips counted on two more fresh engines over the first {new['counted_queries']} timed queries.")]
    return lines
