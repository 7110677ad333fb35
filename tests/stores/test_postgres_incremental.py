"""The PostgreSQL store after a write applies only the change log to its cached lexical
index (migration 10, :mod:`plait.stores.postgres_incremental`): after inserts, deletes,
a document re-indexed and a write by another store object, the incremental index ranks
exactly (ids and float scores) as an index loaded fresh by a new store and as the
embedded store; a log that no longer reaches back, a large change or
``incremental_share=0`` reload in full, with the same answers.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from plait.analysis import analyse_query
from plait.stores.base import BM25Params, Filters, SourceWrite
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_changes import KEEP_GENERATIONS
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema

QUERIES = ("checkout card", "declined payment", "refund ledger card", "session token expired", "zebra", "card")
DOCS = {
    "s1": ["checkout card declined", "checkout session token"],
    "s2": ["refund ledger", "payment declined twice card"],
    "s3": ["inventory stock card card", "session expired token refresh"],
}


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-incremental-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_i_") as name:
        yield name


def _chunks(source: str, texts: Sequence[str]) -> list[Any]:
    return [make_chunk(f"{source}-{i}", text, source_id=source, ordinal=i) for i, text in enumerate(texts)]


def _search(store: Any, text: str, **kwargs: Any) -> list[tuple[str, float]]:
    q = analyse_query(text)
    return list(store.lexical_search("c", q.exact, q.stems, limit=kwargs.pop("limit", 10), **kwargs))


def _fresh(dsn: str, schema: str, text: str, **kwargs: Any) -> list[tuple[str, float]]:
    """The answer of an index loaded fresh: a new store (its own pool, no cache)."""
    store = PostgresStore(dsn, schema=schema)
    try:
        return _search(store, text, **kwargs)
    finally:
        store.close()


class _Counting(PostgresStore):
    """Counts full reloads after a generation moved (the incremental path reads none)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full_reloads = 0

    def _full(self, *args: Any, **kwargs: Any) -> Any:
        self.full_reloads += 1
        return super()._full(*args, **kwargs)


def _bulk(store: Any, writes: Sequence[SourceWrite]) -> None:
    """One transaction on PostgreSQL; the embedded store (no bulk write) one source at a time."""
    if isinstance(store, PostgresStore):
        store.replace_sources("c", writes)
        return
    for w in writes:
        store.replace_source("c", w.source_id, w.scope, w.chunks)


def _same_everywhere(reader: Any, lite: Any, dsn: str, schema: str, queries: Sequence[str] = QUERIES) -> None:
    for text in queries:
        for params in (BM25Params(), BM25Params(k1=1.5, b=1.0, stems_weight=0.0)):
            got = _search(reader, text, params=params, limit=None)
            assert got == _fresh(dsn, schema, text, params=params, limit=None), text
            assert got == _search(lite, text, params=params, limit=None), text


def test_after_inserts_deletes_and_reindexing_the_index_equals_a_fresh_one(
    pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """The reader caches its index (every query term), then another store writes: a new
    source, a document re-indexed (one chunk edited, one kept, one added), a source
    deleted, a bulk write of two sources, a raw SQL insert; after each, the reader's
    answers equal a fresh store's and the embedded store's exactly, with no full reload."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _Counting(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (writer, lite):
            store.ensure_collection("c")
            for source, texts in DOCS.items():
                store.replace_source("c", source, "docs", _chunks(source, texts))
        _same_everywhere(reader, lite, pg_dsn, schema)
        cid = reader._known["c"][0]
        steps = [
            lambda s: s.replace_source("c", "s4", "docs", _chunks("s4", ["zebra checkout checkout", "ledger"])),
            lambda s: s.replace_source("c", "s1", "docs", _chunks("s1", ["checkout card refund", "checkout session token", "card zebra"])),
            lambda s: s.delete_source("c", "s2"),
            lambda s: _bulk(s, [SourceWrite("s5", "docs", _chunks("s5", ["declined declined payment"]), ""),
                                SourceWrite("s3", "docs", _chunks("s3", ["stock card"]), "")]),
        ]
        for step in steps:
            before = reader._lexicon[cid][1]
            for store in (writer, lite):
                step(store)
            _same_everywhere(reader, lite, pg_dsn, schema)
            assert reader._lexicon[cid][1] is not before
        with writer._tx() as conn:
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) SELECT id, 'raw', 'raw', 'docs', 0, "
                "'raw', 'h', '{}', '{}', 'card card refund', 'card card refund' FROM plait_collections WHERE name = 'c'"
            )
        for text in QUERIES:
            assert _search(reader, text, limit=None) == _fresh(pg_dsn, schema, text, limit=None)
        assert reader.full_reloads == 0
    finally:
        writer.close()
        reader.close()
        lite.close()


def test_filtered_queries_after_a_write_read_the_allowed_rows_of_the_new_generation(
    pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """The first query after a write is filtered: the filter's rows come from the snapshot
    the changes were read in (the new chunk, in scope ``adr``, is allowed)."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _Counting(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (writer, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s1", "docs", _chunks("s1", DOCS["s1"]))
        assert _search(reader, "card") == _search(lite, "card")
        for store in (writer, lite):
            store.replace_source("c", "a", "adr", [make_chunk("a-0", "card card", source_id="a", scope="adr")])
        adr = Filters(scopes=("adr",))
        got = _search(reader, "card", filters=adr)
        assert [i for i, _ in got] == ["a-0"] and got == _search(lite, "card", filters=adr)
        assert _search(reader, "card") == _search(lite, "card")
        assert reader.full_reloads == 0
    finally:
        writer.close()
        reader.close()
        lite.close()


def test_a_pruned_log_a_large_change_or_share_zero_reload_in_full(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """A gap in the log (rows deleted, as pruning or writes before migration 10 leave),
    a change larger than the share allows, and ``incremental_share=0``: full reloads,
    still the fresh answers; a one-chunk write right after goes incremental again."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _Counting(pg_dsn, schema=schema)
    never = _Counting(pg_dsn, schema=schema, incremental_share=0.0)
    try:
        writer.ensure_collection("c")
        for source, texts in DOCS.items():
            writer.replace_source("c", source, "docs", _chunks(source, texts))
        for store in (reader, never):
            _search(store, "checkout card")
        writer.replace_source("c", "s4", "docs", _chunks("s4", ["checkout zebra"]))
        writer.replace_source("c", "s5", "docs", _chunks("s5", ["card refund"]))
        with writer._tx() as conn:  # the first of the two generations is gone from the log
            conn.execute("DELETE FROM plait_changes WHERE generation = (SELECT max(generation) - 1 FROM plait_changes)")
        for store in (reader, never):
            assert _search(store, "checkout card") == _fresh(pg_dsn, schema, "checkout card")
        assert (reader.full_reloads, never.full_reloads) == (1, 1)
        writer.replace_sources("c", [SourceWrite(f"b{i}", "docs", _chunks(f"b{i}", ["card bulk"]), "") for i in range(1001)])
        assert _search(reader, "card bulk") == _fresh(pg_dsn, schema, "card bulk")  # 1,001 rows > 1,000 (10 % of 10)
        assert reader.full_reloads == 2
        writer.delete_source("c", "s4")
        for store in (reader, never):
            assert _search(store, "checkout zebra") == _fresh(pg_dsn, schema, "checkout zebra")
        assert (reader.full_reloads, never.full_reloads) == (2, 2)  # never: one reload per generation it saw move
    finally:
        writer.close()
        reader.close()
        never.close()


def test_the_log_is_pruned_in_the_write_and_goes_with_its_collection(pg_dsn: str, schema: str) -> None:
    """Each changing statement logs its generation and row ids; past KEEP_GENERATIONS the
    oldest rows are deleted by the same statement; deleting the collection deletes its log."""
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        store.ensure_collection("c")
        store.replace_source("c", "s", "docs", _chunks("s", ["a b", "c"]))
        store.replace_source("c", "s", "docs", _chunks("s", ["a b", "c d"]))
        with store._read() as conn:
            rows = conn.execute("SELECT generation, added, removed, updated FROM plait_changes ORDER BY generation").fetchall()
            ids = dict(conn.execute("SELECT chunk_id, id FROM plait_chunks").fetchall())
        assert rows == [(1, [1, 2], [], []), (2, [], [2], []), (3, [ids["s-1"]], [], [])]
        with store._tx() as conn:
            cid = conn.execute("SELECT id FROM plait_collections WHERE name = 'c'").fetchone()
            assert cid is not None
            for i in range(KEEP_GENERATIONS + 5):
                conn.execute(
                    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                    "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, 'r', 'docs', 0, 'x', 'h', "
                    "'{}', '{}', 'x', 'x')",
                    (cid[0], f"r{i}"),
                )
        with store._read() as conn:
            kept = conn.execute("SELECT count(*), min(generation), max(generation) FROM plait_changes").fetchone()
        last = 3 + KEEP_GENERATIONS + 5
        assert kept == (KEEP_GENERATIONS, last - KEEP_GENERATIONS + 1, last)
        store.delete_collection("c")
        with store._read() as conn:
            assert conn.execute("SELECT count(*) FROM plait_changes").fetchone() == (0,)
    finally:
        store.close()


def test_two_writers_at_once_and_a_reader_meanwhile(pg_dsn: str, schema: str) -> None:
    """Two stores (two processes) write 40 sources each at once while a third searches in
    a loop: every generation is logged exactly once, and the reader's final answers equal
    a fresh store's."""
    writers = [PostgresStore(pg_dsn, schema=schema) for _ in range(2)]
    reader = PostgresStore(pg_dsn, schema=schema)
    errors: list[BaseException] = []
    try:
        writers[0].ensure_collection("c")
        writers[0].replace_source("c", "seed", "docs", _chunks("seed", DOCS["s1"]))
        done = threading.Event()

        def write(k: int) -> None:
            try:
                for i in range(40):
                    writers[k].replace_source("c", f"w{k}-{i % 7}", "docs", _chunks(f"w{k}-{i % 7}", [f"card w{k} n{i}", "checkout"]))
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        def read() -> None:
            try:
                while not done.is_set():
                    for text in ("card", "checkout card"):
                        _search(reader, text)
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
        searching = threading.Thread(target=read)
        searching.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        done.set()
        searching.join(60)
        assert errors == []
        with reader._read() as conn:
            generation = conn.execute("SELECT generation FROM plait_collections WHERE name = 'c'").fetchone()
            logged = conn.execute("SELECT array_agg(generation ORDER BY generation) FROM plait_changes").fetchone()
        assert generation is not None and logged is not None
        assert logged[0] == list(range(1, generation[0] + 1))
        for text in ("card", "checkout card", "card w1 n39", "checkout"):
            assert _search(reader, text, limit=None) == _fresh(pg_dsn, schema, text, limit=None)
    finally:
        for w in writers:
            w.close()
        reader.close()


class _WriteDuringAdvance(_Counting):
    """Lets another store commit a write after the check saw the generation move and
    before the changes are read."""

    hook: Any = None

    def _advance(self, *args: Any, **kwargs: Any) -> Any:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return super()._advance(*args, **kwargs)


def test_a_write_committed_mid_reload_is_read_whole(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """Regression guard for the snapshot: the check sees generation g+1, a second write
    commits (g+2) before the changes are read; the changes, the added rows and the
    generation are read in one snapshot, so the index is g+2's, complete, and cached
    under g+2."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _WriteDuringAdvance(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (writer, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s1", "docs", _chunks("s1", DOCS["s1"]))
        assert _search(reader, "card checkout") == _search(lite, "card checkout")
        for store in (writer, lite):
            store.replace_source("c", "s2", "docs", _chunks("s2", DOCS["s2"]))
        lite.replace_source("c", "s3", "docs", _chunks("s3", ["card card checkout"]))
        reader.hook = lambda: writer.replace_source("c", "s3", "docs", _chunks("s3", ["card card checkout"]))
        got = _search(reader, "card checkout")
        assert got == _search(lite, "card checkout") and got[0][0] == "s3-0"
        with writer._read() as conn:
            row = conn.execute("SELECT id, generation FROM plait_collections WHERE name = 'c'").fetchone()
        assert row is not None and reader._lexicon[row[0]][0] == row[1]
        assert reader.full_reloads == 0
    finally:
        writer.close()
        reader.close()
        lite.close()


def test_added_rows_are_counted_as_the_triggers_count_them(pg_dsn: str, schema: str) -> None:
    """Raw SQL rows with an empty field, repeated tokens, a double and a leading space: the
    postings the incremental index counts for them (empty text: no token; otherwise every
    space splits, so '' is a token) are the triggers' own, so the ranking of the terms
    'a', '' and 'b' equals a fresh load's. (Counting '' in an empty field as a token, as
    ``''.split(' ')`` does, ranked the row with the empty field for the term ''.)"""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _Counting(pg_dsn, schema=schema)
    try:
        writer.ensure_collection("c")
        writer.replace_source("c", "s", "docs", _chunks("s", ["a b", "b c"]))
        terms = ([["a", ""], ["b", ""]], [["", "b"], ["a"]], [["a"], ["", "c"]])
        for e, s in terms:  # every term cached (or remembered as holding none)
            reader.lexical_search("c", e, s, limit=None)
        with writer._tx() as conn:
            for i, (exact, stems) in enumerate([("", "a b"), ("a  a b", " b"), (" a", ""), ("b b b", "a  ")]):
                conn.execute(
                    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                    "content_hash, origin, metadata, lex_exact, lex_stems) SELECT id, %s, 'raw', 'docs', 0, 'x', 'h', "
                    "'{}', '{}', %s, %s FROM plait_collections WHERE name = 'c'",
                    (f"raw{i}", exact, stems),
                )
        fresh = PostgresStore(pg_dsn, schema=schema)
        try:
            for e, s in terms:
                got = reader.lexical_search("c", e, s, limit=None)
                assert got == fresh.lexical_search("c", e, s, limit=None), (e, s)
        finally:
            fresh.close()
        assert reader.full_reloads == 0
        assert any(i == "raw0" for i, _ in reader.lexical_search("c", [], ["a"], limit=None))
    finally:
        writer.close()
        reader.close()
