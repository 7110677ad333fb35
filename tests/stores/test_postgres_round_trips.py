"""Round trips of one warm ``Plait.search`` on the PostgreSQL store (issue 26), counted
on the wire: every statement sent outside a pipeline is one round trip, one pipeline
(however many statements it holds) is one.

Hand count of a warm hybrid search (lexical index, dense matrix and the page's chunks
cached; embedder chosen by the store's recorded settings): **one** — the collection, its
settings and its key (generation, revision) in one statement (``collection_with_settings``).
Inside the search's scope (:mod:`plait.stores.postgres_scope`) the arms and the page's
chunk rows answer from the caches of that key without checking it again. It was three:
that statement, the arms' pipeline (the collection check, and the dense statement until
the dense arm ran in process), the page's chunk rows. Settings are still read on every
search: a write to them is seen by the next search; so is a write of chunks by another
process (tested below).

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from plait.collection_settings import write_settings
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.testing.pg import postgres_dsn
from plait.testing.pg_wire import round_trips


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-trips-") as dsn:
        yield dsn


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    name = f"plait_t_{uuid.uuid4().hex[:12]}"
    s = PostgresStore(pg_dsn, schema=name)
    yield s
    s.close()  # idempotent: a Plait closes its store
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nalpha retrieval engine number {i} word{i % 3}\n")
    return docs


def test_a_warm_hybrid_search_is_one_round_trip(
    store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexing = PostgresStore(store.dsn, schema=store.schema)  # another process, as it were
    with Plait(indexing, embedder="fake") as indexer:
        indexer.index(_corpus(tmp_path), collection="c")
    with Plait(store) as plait:  # the embedder comes from the collection's recorded settings
        first = plait.search("alpha retrieval", collection="c", k=3)
        plait.search("alpha retrieval", collection="c", k=3)  # warm
        with round_trips() as wire:
            result = plait.search("alpha retrieval", collection="c", k=3)
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in first.hits]
    assert len(result.hits) == 3 and result.vector_available
    assert len(wire.trips) == 1, wire.trips
    assert len(wire.trips[0]) == 1 and "p.settings" in wire.trips[0][0] and "p.revision" in wire.trips[0][0]
    assert store.last_vector_path == "exact"


def test_outside_a_search_scope_the_arms_and_rows_check_the_key(store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's own calls (no scope open): each checks the collection's key first."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    with Plait(store, embedder=embedder) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        vector = embedder.embed_query("alpha")
        store.search_arms("c", ["alpha"], [], vector, limit=3)
        store.get_chunks("c", ["x"])
        with round_trips() as wire:
            lexical, dense = store.search_arms("c", ["alpha"], [], vector, limit=3)
            store.get_chunks("c", [i for i, _ in dense])
    assert len(lexical) == 3 and len(dense) == 3
    assert [len(t) for t in wire.trips] == [1, 1], wire.trips  # the arms' check; the rows' check
    assert all("FROM plait_collections" in t[0] for t in wire.trips)


def test_the_next_search_sees_another_process_s_writes(store: PostgresStore, tmp_path: Path) -> None:
    """New chunks, chunks updated in place (metadata: the revision) and deleted ones,
    written by another store object between two searches of a warm one."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    writer = PostgresStore(store.dsn, schema=store.schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(store, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        before = plait.search("zebra", collection="c", k=3, mode="lexical")
        assert before.hits == []
        plait.search("alpha retrieval", collection="c", k=3)  # warm caches
        extra = tmp_path / "extra"
        extra.mkdir()
        (extra / "z.md").write_text("# Zebra\n\nzebra alpha retrieval\n")
        indexer.index(extra, collection="c")
        hits = plait.search("zebra", collection="c", k=3).hits  # hybrid: both arms, rows
        assert "zebra" in hits[0].content and not any("zebra" in h.content for h in hits[1:])
        with writer._tx() as conn:
            conn.execute("UPDATE plait_chunks SET metadata = '{\"colour\": \"striped\"}' WHERE content LIKE '%%zebra%%'")
        again = plait.search("zebra", collection="c", k=3).hits
        assert again[0].chunk_id == hits[0].chunk_id and again[0].metadata == {"colour": "striped"}
        assert "colour" not in hits[0].metadata
        writer.delete_source("c", "z.md")
        gone = plait.search("zebra", collection="c", k=3).hits
        assert len(gone) == 3 and not any("zebra" in h.content for h in gone)


def test_settings_stay_fresh_and_a_missing_collection_is_not_found(
    store: PostgresStore, tmp_path: Path
) -> None:
    with Plait(store, embedder=FakeEmbedder(dimension=16, model="hash-16")) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        assert plait.search("alpha retrieval", collection="c", k=3).fusion.method == "adaptive"
        write_settings(store, "c", fusion={"method": "rrf"})  # does not bump the generation
        assert plait.search("alpha retrieval", collection="c", k=3).fusion.method == "rrf"
        with pytest.raises(NotFoundError):
            plait.search("alpha", collection="nope", k=3)


def test_collection_with_settings_is_get_collection_and_get_settings(store: PostgresStore) -> None:
    assert store.collection_with_settings("c") is None
    store.ensure_collection("c")
    store.update_settings("c", {"embedder": "fake", "fusion": {"method": "rrf"}})
    both = store.collection_with_settings("c")
    assert both == (store.get_collection("c"), {"embedder": "fake", "fusion": {"method": "rrf"}})


def test_a_warm_ask_reads_its_collection_once_and_is_one_round_trip(
    store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # by hand: the ask reads the collection and its settings in one statement
    # (collection_with_settings: gate check, changedSince, ask settings) and its search
    # uses that read: the whole ask is one search scope, so the search, its arms, its
    # rows and unknown_terms' lexical lookups answer from the caches of the key that
    # statement read. One round trip for a warm ask; it was 7 (that statement, the
    # search's own collection_with_settings, five key checks of unknown_terms' lexical
    # lookups), and 6 reads of the collection before (the service's existence check,
    # ensure_gate's two, the share's two, the search's)
    with Plait(store, embedder="fake", llm="none") as plait:
        plait.index(_corpus(tmp_path), collection="c")
        plait.ask("What is alpha retrieval engine number 3?", collection="c")  # warm
        with round_trips() as wire:
            plait.ask("What is alpha retrieval engine number 3?", collection="c")
    # the collection's row (get_collection, collection_with_settings) or its settings;
    # not the lexical arm's generation checks (one per content word of unknown_terms)
    reads = [
        t[0] for t in wire.trips
        if len(t) == 1 and (t[0].startswith("SELECT p.name") or t[0].startswith("SELECT settings FROM"))
    ]
    assert len(reads) == 1, reads
    assert "p.settings" in reads[0] and "p.revision" in reads[0]  # collection_with_settings
    assert len(wire.trips) == 1, wire.trips
