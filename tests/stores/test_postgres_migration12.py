"""Migration 12 and the write path's locking: the postings DELETE of a chunk delete
probes ``plait_postings_pkey`` by its full key (it read every posting of each of the
chunk's terms), a lock conflict is a :class:`StoreConflictError` (not "lost PostgreSQL"),
and a migration that waits for a table lock does not stall searches behind it.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from plait.errors import StoreConflictError, StoreError, StoreUnavailableError
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_changes import MIGRATION_10
from plait.stores.postgres_schema import LATEST_VERSION
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema

N = 3000


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migration12-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_m12_") as name:
        yield name


def _connect(dsn: str, schema: str, *, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=autocommit)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    if not autocommit:
        conn.commit()
    return conn


def _postings_delete_plan(dsn: str, schema: str, *, old_function: bool) -> list[dict[str, Any]]:
    """The plan nodes over ``plait_postings`` of the postings DELETE of the installed
    ``plait_lex_stats_remove`` (its text read from ``pg_proc``), run against a ``changed``
    table of 30 of ``N`` chunks that all hold "common" (df ``N`` in each field), without
    statistics, as a transition table has none. ``old_function``: with migration 10's
    definition put back."""
    store = PostgresStore(dsn, schema=schema)
    try:
        store.ensure_collection("c")
        store.replace_source("c", "s", "docs", [
            make_chunk(f"k{i}", f"common w{i} v{i} alpha beta gamma{i % 7}", source_id="s", ordinal=i)
            for i in range(N)
        ])
    finally:
        store.close()
    with _connect(dsn, schema, autocommit=False) as conn:
        if old_function:
            conn.execute(MIGRATION_10[MIGRATION_10.index("CREATE OR REPLACE FUNCTION plait_lex_stats_remove"):])
        row = conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'plait_lex_stats_remove' "
                           "AND pronamespace = current_schema()::regnamespace").fetchone()
        assert row is not None
        body = str(row[0])
        begin = body.index("END IF;") + len("END IF;")
        statement = body[begin:body.index(";", begin)].strip()
        assert "DELETE FROM plait_postings" in statement
        conn.execute("CREATE TEMP TABLE changed AS SELECT * FROM plait_chunks WHERE ordinal BETWEEN 2300 AND 2329")
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement).fetchone()
        conn.rollback()
    assert plan is not None
    nodes: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "plait_postings" and node.get("Node Type") != "ModifyTable":
            nodes.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0][0]["Plan"])
    return nodes


def _full_key(node: dict[str, Any]) -> bool:
    cond = str(node.get("Index Cond", ""))
    return node.get("Index Name") == "plait_postings_pkey" and all(
        f"{column} =" in cond for column in ("collection_id", "term", "chunk_row"))


def test_the_postings_delete_probes_the_primary_key_by_all_three_columns(pg_dsn: str, schema: str) -> None:
    """Each posting of a deleted chunk is one probe by (collection_id, term, chunk_row) (then
    deleted by its ctid); no plan node reads plait_postings otherwise."""
    assert LATEST_VERSION >= 12
    nodes = _postings_delete_plan(pg_dsn, schema, old_function=False)
    probes = [n for n in nodes if n.get("Node Type") != "Tid Scan"]
    assert probes and all(_full_key(n) for n in probes), probes


def test_before_migration_12_the_postings_delete_reads_whole_term_ranges(pg_dsn: str, schema: str) -> None:
    """The control: migration 10's statement probes by (collection_id, term) only (every
    posting of "common") or scans the table."""
    nodes = _postings_delete_plan(pg_dsn, schema, old_function=True)
    assert nodes and not all(_full_key(n) for n in nodes if n.get("Node Type") != "Tid Scan")


def test_a_serialization_failure_is_a_conflict_not_lost_postgresql(pg_dsn: str, schema: str) -> None:
    """SQLSTATE 40001 in a store transaction: StoreConflictError (retry), not
    StoreUnavailableError ("lost PostgreSQL"); the store goes on working."""
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        store.ensure_collection("c")
        with pytest.raises(StoreConflictError, match=r"40001.*retry it") as caught, store._tx() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.execute("SELECT created_at FROM plait_collections WHERE name = 'c'").fetchone()
            with _connect(pg_dsn, schema) as other:
                other.execute("UPDATE plait_collections SET created_at = created_at || 'x' WHERE name = 'c'")
            conn.execute("UPDATE plait_collections SET created_at = created_at || 'x' WHERE name = 'c'")
        assert not isinstance(caught.value, StoreUnavailableError)
        assert isinstance(caught.value, StoreError)
        store.ensure_collection("c")
        with store._read() as conn:
            row = conn.execute("SELECT created_at FROM plait_collections WHERE name = 'c'").fetchone()
        assert row is not None and str(row[0]).endswith("x") and not str(row[0]).endswith("xx")
    finally:
        store.close()
