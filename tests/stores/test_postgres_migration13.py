"""Migration 13: an in-place update from other SQL takes no lock on the collection's row
(review 5, finding 2: it deadlocked with the store's writers, which lock that row first),
its revision is logged and folded by the next store write, and a re-created schema is
another *instance* whose caches a running process drops (finding 7: same ids,
generations and revisions, old content served).

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.stores.base import SourceWrite
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_keys import REVISION
from plait.stores.postgres_lockwait import MIGRATION_12
from plait.stores.postgres_schema import LATEST_VERSION
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema

DIM = 16


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migration13-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_m13_") as name:
        yield name


@pytest.fixture
def open_pg(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    with store_opener(pg_dsn, schema) as make:
        yield make


def _unit(seed: int, n: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _fill(store: PostgresStore, texts: list[str], seed: int = 3) -> np.ndarray:
    vectors = _unit(seed, len(texts))
    store.ensure_collection("c")
    store.set_embedder("c", provider="fake", model="m", dimension=DIM)
    store.replace_source("c", "src", "docs", [
        make_chunk(f"k{i}", text, source_id="src", vector=vectors[i].tolist(), ordinal=i)
        for i, text in enumerate(texts)
    ])
    return vectors


def _raw(dsn: str, schema: str) -> psycopg.Connection:
    """An operator's session: its own transaction, plait's schema on the path."""
    conn = psycopg.connect(dsn, autocommit=False)
    conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
    conn.execute("SET lock_timeout = '20s'")
    return conn


def _key(dsn: str, schema: str) -> tuple[int, int, int]:
    """(revision column, log rows, revision as readers key by it) of collection 'c'."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
        row = conn.execute(
            f"SELECT p.revision, (SELECT count(*) FROM plait_revisions r WHERE r.collection_id = p.id), {REVISION} "
            "FROM plait_collections p WHERE p.name = 'c'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _in_thread(run: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(run())
        except BaseException as error:  # reported by the test's assertions
            outcome.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_a_raw_in_place_update_and_a_store_write_do_not_deadlock(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    """The review's steps: an operator's transaction holds chunk k1; ``set_vectors`` locks
    the collection's row and waits for k1; the operator's UPDATE of k2 fires the revision
    trigger. Before, the trigger waited for the collection's row: a deadlock (one side
    aborted after deadlock_timeout). Now the UPDATE returns at once, the operator commits,
    the writer goes on; each moved the revision once."""
    assert LATEST_VERSION >= 13
    pg = open_pg()
    vectors = _fill(pg, [f"text {i}" for i in range(6)])
    before = _key(pg_dsn, schema)
    raw = _raw(pg_dsn, schema)
    try:
        raw.execute("SELECT 1 FROM plait_chunks WHERE chunk_id = 'k1' FOR UPDATE")
        writer, outcome = _in_thread(lambda: pg.set_vectors("c", {"k1": -vectors[1]}))
        time.sleep(1.0)
        assert writer.is_alive()  # waiting for k1
        started = time.monotonic()
        raw.execute("UPDATE plait_chunks SET metadata = '{\"x\": 1}' WHERE chunk_id = 'k2'")
        took = time.monotonic() - started
        raw.commit()
    finally:
        raw.close()
    writer.join(30)
    assert outcome == [1]
    assert took < 0.5, took  # no wait for the collection's row (deadlock_timeout is 1 s)
    # two revising transactions; the raw one's log row was committed before the writer's
    # bump (its statement's snapshot sees it), which folded it into the column
    assert _key(pg_dsn, schema) == (before[0] + 2, 0, before[2] + 2)
    rows = pg.get_chunks("c", ["k1", "k2"])
    assert rows["k2"].metadata == {"x": 1}


def test_a_writer_that_updated_a_chunk_does_not_block_a_raw_update_of_another(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    """``set_vectors`` updates k2 (its revision bump holds the collection's row), then waits
    for k1, which an operator's transaction holds; that transaction's UPDATE of k3 does not
    wait for the writer (before: it waited for the collection's row, the writer for k1 —
    a deadlock)."""
    pg = open_pg()
    vectors = _fill(pg, [f"text {i}" for i in range(6)])
    before = _key(pg_dsn, schema)
    raw = _raw(pg_dsn, schema)
    try:
        raw.execute("SELECT 1 FROM plait_chunks WHERE chunk_id = 'k1' FOR UPDATE")
        writer, outcome = _in_thread(lambda: pg.set_vectors("c", {"k2": -vectors[2], "k1": -vectors[1]}))
        time.sleep(1.0)
        assert writer.is_alive()
        started = time.monotonic()
        raw.execute("UPDATE plait_chunks SET metadata = '{\"y\": 2}' WHERE chunk_id = 'k3'")
        took = time.monotonic() - started
        raw.commit()
    finally:
        raw.close()
    writer.join(30)
    assert outcome == [2]
    assert took < 0.5, took
    after = _key(pg_dsn, schema)
    # the writer folded what was committed when it bumped (nothing: the raw update was
    # not), so the raw transaction's revision is still in the log
    assert after == (before[0] + 1, 1, before[2] + 2)


def test_logged_revisions_move_the_key_and_are_folded_by_the_next_store_write(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    """Three operator transactions: three log rows, the key +3, and a warm reader sees
    each change (chunk rows and the dense matrix). The next store write folds them: the
    column takes them plus its own bump, the log is empty, the key +4."""
    pg = open_pg()
    vectors = _fill(pg, [f"text {i}" for i in range(6)])
    reader = open_pg()
    assert [cid for cid, _ in reader.vector_search("c", vectors[4], limit=1)] == ["k4"]
    assert reader.get_chunks("c", ["k0"])["k0"].metadata == {}
    column, logged, revision = _key(pg_dsn, schema)
    assert logged == 0
    for i in range(3):
        with _raw(pg_dsn, schema) as raw:
            raw.execute("UPDATE plait_chunks SET metadata = %s WHERE chunk_id = 'k0'", (f'{{"n": {i}}}',))
            raw.commit()
        assert _key(pg_dsn, schema) == (column, i + 1, revision + i + 1)
        assert reader.get_chunks("c", ["k0"])["k0"].metadata == {"n": i}
    with _raw(pg_dsn, schema) as raw:  # a vector updated by other SQL: the matrix follows
        raw.execute("UPDATE plait_chunks SET vector = %s WHERE chunk_id = 'k5'", (str((-vectors[4]).tolist()),))
        raw.execute("UPDATE plait_chunks SET vector = %s WHERE chunk_id = 'k4'", (str((-vectors[5]).tolist()),))
        raw.commit()
    assert _key(pg_dsn, schema) == (column, 4, revision + 4)
    assert [cid for cid, _ in reader.vector_search("c", -vectors[4], limit=1)] == ["k5"]
    pg.set_vectors("c", {"k3": -vectors[3]})
    assert _key(pg_dsn, schema) == (column + 5, 0, revision + 5)
    assert [cid for cid, _ in reader.vector_search("c", -vectors[3], limit=1)] == ["k3"]


def test_a_schema_dropped_and_rebuilt_under_a_running_reader_is_not_served_from_its_caches(
    pg_dsn: str, schema: str
) -> None:
    """The review's steps: a warm reader, the schema dropped, the collection rebuilt with
    other texts, so it has the same id, generation and revision as before. Before, the
    reader answered from its caches: the old lexical hits, the old chunk row, the old
    matrix. Now its next check reads another instance and every cache is dropped."""
    writer = PostgresStore(pg_dsn, schema=schema)
    old = _fill(writer, [f"text {i} word{i}" for i in range(5)], seed=3)
    writer.close()
    reader = PostgresStore(pg_dsn, schema=schema)
    try:
        assert len(reader.lexical_search("c", ["text"], [], limit=10)) == 5
        assert reader.get_chunks("c", ["k0"])["k0"].content == "text 0 word0"
        assert [cid for cid, _ in reader.vector_search("c", old[2], limit=1)] == ["k2"]
        with reader._read() as conn:
            first = conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        writer = PostgresStore(pg_dsn, schema=schema)
        new = _fill(writer, [f"other {i}" for i in range(5)], seed=5)
        writer.close()
        with reader._read() as conn:
            again = conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall()
        assert again == first  # the numbers every cache was keyed by
        assert reader.lexical_search("c", ["text"], [], limit=10) == []
        assert [cid for cid, _ in reader.lexical_search("c", ["other"], [], limit=10)] == ["k0", "k1", "k2", "k3", "k4"]
        assert reader.get_chunks("c", ["k0"])["k0"].content == "other 0"
        best = int(np.argmax(new @ old[2]))
        assert [cid for cid, _ in reader.vector_search("c", old[2], limit=1)] == [f"k{best}"]
    finally:
        reader.close()


def test_a_rebuilt_schema_is_seen_by_a_search_scope_and_by_get_chunks_alone(pg_dsn: str, schema: str) -> None:
    """The other two reads of the key: ``collection_with_settings`` (a search scope's first
    statement) and ``get_chunks`` (its check) each notice the new instance too."""
    writer = PostgresStore(pg_dsn, schema=schema)
    _fill(writer, [f"text {i}" for i in range(3)])
    writer.close()
    reader = PostgresStore(pg_dsn, schema=schema)
    try:
        assert reader.get_chunks("c", ["k1"])["k1"].content == "text 1"
        with reader.search_scope("c"):
            assert reader.collection_with_settings("c") is not None
            assert [cid for cid, _ in reader.lexical_search("c", ["text"], [], limit=1)] == ["k0"]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        writer = PostgresStore(pg_dsn, schema=schema)
        _fill(writer, [f"again {i}" for i in range(3)])
        writer.close()
        assert reader.get_chunks("c", ["k1"])["k1"].content == "again 1"
        with reader.search_scope("c"):
            assert reader.collection_with_settings("c") is not None
            assert reader.lexical_search("c", ["text"], [], limit=1) == []
    finally:
        reader.close()


def test_what_a_read_found_before_the_caches_were_dropped_is_not_cached_after(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """A search that began before another thread's check saw a new instance (and dropped
    every cache) finishes afterwards: its index, matrix and chunk rows are not cached."""
    pg = open_pg()
    vectors = _fill(pg, [f"text {i}" for i in range(3)])
    assert len(pg.lexical_search("c", ["text"], [], limit=10)) == 3
    assert [cid for cid, _ in pg.vector_search("c", vectors[1], limit=1)] == ["k1"]
    chunks = pg.get_chunks("c", ["k0", "k1"])
    cid = pg._known["c"][0]
    generation, index = pg._lexicon[cid]
    held = pg._dense.get(cid)
    assert held is not None and pg._rows.bytes > 0
    key, matrix = held
    epoch = pg._instances.begin()  # this thread's read begins
    assert pg._instances.observe((0, "another instance")) == epoch + 1  # another thread's check
    assert len(pg._lexicon) == 0 and pg._dense.bytes == 0 and pg._rows.bytes == 0
    pg._keep(cid, generation, index)
    pg._dense.keep(cid, key, matrix, epoch=pg._instances.reading())
    pg._rows.add(cid, key, list(chunks.values()), epoch=epoch)
    assert len(pg._lexicon) == 0 and pg._dense.get(cid) is None and pg._rows.bytes == 0
    assert len(pg.lexical_search("c", ["text"], [], limit=10)) == 3  # the real instance again: cached anew
    assert len(pg._lexicon) == 1


def _lex_terms_plans(dsn: str, schema: str, *, old_function: bool) -> list[dict[str, Any]]:
    """The plan nodes reading ``plait_lex_terms`` of the document-frequency UPDATE and the
    term DELETE of the installed ``plait_lex_stats_remove`` (their text read from
    ``pg_proc``), run against a ``changed`` table of 30 of 3,000 chunks without statistics
    (as a transition table has none), under the function's own settings (``proconfig``), as
    the trigger runs them. ``old_function``: with migration 12's definition put back."""
    store = PostgresStore(dsn, schema=schema)
    try:
        store.ensure_collection("c")
        store.replace_source("c", "s", "docs", [
            make_chunk(f"k{i}", f"common w{i} v{i} alpha beta gamma{i % 7}", source_id="s", ordinal=i)
            for i in range(3000)
        ])
        store.vacuum()  # the vocabulary's statistics, as autovacuum would have them
    finally:
        store.close()
    nodes: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        if old_function:
            conn.execute(MIGRATION_12[MIGRATION_12.index("CREATE OR REPLACE FUNCTION plait_lex_stats_remove"):])
        row = conn.execute("SELECT prosrc, proconfig FROM pg_proc WHERE proname = 'plait_lex_stats_remove' "
                           "AND pronamespace = current_schema()::regnamespace").fetchone()
        assert row is not None
        body, config = str(row[0]), list(row[1] or [])
        update = body.index("UPDATE plait_lex_terms")
        delete = body.index("DELETE FROM plait_lex_terms")
        if "WITH x AS MATERIALIZED" in body[update:delete]:  # the DELETE's own CTE
            delete = body.rindex("WITH x AS MATERIALIZED", update, delete)
        statements = [body[start:body.index(";", start)] for start in (update, delete)]
        planner = sorted(item for item in config if not item.startswith("search_path="))
        assert planner == ([] if old_function else ["enable_hashjoin=off", "enable_mergejoin=off"])
        for item in planner:
            name, value = item.split("=", 1)
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        conn.execute("CREATE TEMP TABLE changed AS SELECT * FROM plait_chunks WHERE ordinal BETWEEN 2300 AND 2329")

        def walk(node: dict[str, Any]) -> None:
            if node.get("Relation Name") == "plait_lex_terms" and node.get("Node Type") != "ModifyTable":
                nodes.append(node)
            for child in node.get("Plans", []):
                walk(child)

        for statement in statements:
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement).fetchone()
            assert plan is not None
            walk(plan[0][0]["Plan"])
        conn.rollback()
    return nodes


def test_the_vocabulary_is_probed_by_key_when_chunks_are_deleted(pg_dsn: str, schema: str) -> None:
    """Both statements read plait_lex_terms only by probes of its primary key on
    (collection_id, key), one per deleted term (the DELETE then by the rows' ctids)."""
    nodes = _lex_terms_plans(pg_dsn, schema, old_function=False)
    probes = [node for node in nodes if node["Node Type"] != "Tid Scan"]
    assert len(probes) == 2 and len(nodes) == 3, nodes
    for node in probes:
        assert node["Node Type"] in ("Index Scan", "Index Only Scan"), node
        assert node["Index Name"] == "plait_lex_terms_pkey"
        assert "collection_id =" in str(node["Index Cond"]) and "key =" in str(node["Index Cond"])


def test_without_the_settings_the_vocabulary_is_scanned_whole(pg_dsn: str, schema: str) -> None:
    """The control: the same statements as the function ran them until migration 13 read
    plait_lex_terms by a sequential scan (hash join) — every term of every collection."""
    nodes = _lex_terms_plans(pg_dsn, schema, old_function=True)
    assert any(node["Node Type"] == "Seq Scan" for node in nodes), nodes


def _corpus(tmp_path: Path, name: str, word: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for i in range(6):
        (folder / f"doc{i}.md").write_text(f"# doc {i}\n\n{word} retrieval engine number {i}\n")
    return folder


def test_a_rebuilt_schema_is_seen_by_searches_sent_ahead(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """Through ``Plait.search``, whose scope sends the first statement ahead and runs on the
    row read last time: after the schema is rebuilt with other texts (the same id and key)
    the search finds the new texts (before: the old hits)."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader = PostgresStore(pg_dsn, schema=schema)
    with Plait(PostgresStore(pg_dsn, schema=schema), embedder=embedder) as indexer:
        indexer.index(_corpus(tmp_path, "a", "alpha"), collection="c")
    with Plait(reader, embedder=embedder) as plait:
        for _ in range(2):  # the second one sent ahead, answered from the caches
            assert len(plait.search("alpha", collection="c", k=10, mode="lexical").hits) == 6
        with reader._read() as conn:
            key = conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        with Plait(PostgresStore(pg_dsn, schema=schema), embedder=embedder) as indexer:
            indexer.index(_corpus(tmp_path, "b", "omega"), collection="c")
        with reader._read() as conn:
            assert conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall() == key
        assert plait.search("alpha", collection="c", k=10, mode="lexical").hits == []
        assert len(plait.search("omega", collection="c", k=10, mode="lexical").hits) == 6


def test_the_sources_count_of_a_rebuilt_schema_is_counted_again(pg_dsn: str, schema: str) -> None:
    """The sources count kept per (id, generation, revision): 3 sources written in one
    statement, then the schema rebuilt with 2 (the same id and key): 2 (before: 3)."""

    def build(store: PostgresStore, sources: int) -> None:
        store.ensure_collection("c")
        store.replace_sources("c", [
            SourceWrite(f"s{j}", "docs", [make_chunk(f"k{j}", f"text {j}", source_id=f"s{j}")]) for j in range(sources)
        ])

    writer = PostgresStore(pg_dsn, schema=schema)
    build(writer, 3)
    writer.close()
    reader = PostgresStore(pg_dsn, schema=schema)
    try:
        for _ in range(2):  # the second from the count kept for the key
            info = reader.get_collection("c")
            assert info is not None and info.sources == 3
        with reader._read() as conn:
            key = conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        writer = PostgresStore(pg_dsn, schema=schema)
        build(writer, 2)
        writer.close()
        with reader._read() as conn:
            assert conn.execute("SELECT p.id, p.generation, p.revision FROM plait_collections p").fetchall() == key
        info = reader.get_collection("c")
        assert info is not None and info.sources == 2
    finally:
        reader.close()
