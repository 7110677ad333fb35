"""``PostgresStore.vacuum()`` visits every table the store's writes churn, on a real
PostgreSQL (``PLAIT_PG_DSN`` or a private ``pgserver``).

Each write updates its collection's row in ``plait_collections`` (generation, counts,
revision), so a vacuum that skipped it left the table to bloat with one dead row version
per write. The server's own counters (``pg_stat_user_tables``: ``vacuum_count`` counts
manual vacuums only, never autovacuum's) say which tables were vacuumed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from plait.stores.postgres import PostgresStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema
from plait.usage import UsageRow


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-vacuum-") as dsn:
        yield dsn


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[PostgresStore]:
    with throwaway_schema(pg_dsn) as schema:
        store = PostgresStore(pg_dsn, schema=schema, vacuum_after=None)
        try:
            yield store
        finally:
            store.close()


def _stats(store: PostgresStore) -> dict[str, tuple[int, int, bool]]:
    """Per table of the store's schema: (manual vacuum count, dead tuples, last_vacuum set)."""
    with store._read() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, vacuum_count, n_dead_tup, last_vacuum IS NOT NULL FROM pg_stat_user_tables "
            "WHERE schemaname = current_schema()"
        ).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), bool(r[3])) for r in rows}


def test_vacuum_visits_the_collections_row_every_write_updates(pg: PostgresStore) -> None:
    pg.ensure_collection("c")
    for n in range(40):  # 40 writes: 40 updates of the collection's row, each a dead version
        source = f"s{n % 4}"
        pg.replace_source("c", source, "docs", [make_chunk(f"k{n}", f"text number {n}", source_id=source)])
    pg.mark_scope_indexed("c", "docs", "2026-01-01T00:00:00Z")
    assert _stats(pg)["plait_collections"][0] == 0
    pg.vacuum()
    after = _stats(pg)
    count, dead, visited = after["plait_collections"]
    assert count == 1 and visited, after["plait_collections"]
    assert dead == 0  # the row versions the 40 writes left are recycled
    for table in ("plait_changes", "plait_sources", "plait_scopes", "plait_postings", "plait_chunks"):
        assert after[table][0] == 1 and after[table][2], (table, after[table])


def test_vacuum_leaves_only_the_rarely_written_record_tables(pg: PostgresStore) -> None:
    """Every table a write, an index run or a backfill batch changes is vacuumed; what is
    left to autovacuum is the record tables (runs, cards, keys, imports) and two tables
    written once. A new table fails this test until it is put on one side or the other."""
    pg.ensure_collection("c")
    pg.replace_source("c", "s", "docs", [make_chunk("k", "text", source_id="s")])
    usage = UsageRow(bucket="2026-01-01T00:00:00Z", kind="embedding", purpose="index", provider="fake", model="m")
    pg.set_vectors("c", {}, usage=[usage])
    pg.vacuum()
    stats = _stats(pg)
    vacuumed = {t for t, (count, _, _) in stats.items() if count}
    assert vacuumed == {
        "plait_postings", "plait_lex_terms", "plait_chunks", "plait_collections", "plait_changes",
        "plait_sources", "plait_usage", "plait_scopes", "plait_revisions", "plait_counts",
        "plait_vector_claims",
    }
    assert set(stats) - vacuumed == {
        "plait_refinery_runs", "plait_refinery_cards", "plait_api_keys", "plait_record_imports",
        "plait_instance", "plait_schema_version",
    }
