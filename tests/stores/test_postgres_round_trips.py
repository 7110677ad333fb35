"""Round trips of one warm ``Plait.search`` on the PostgreSQL store (issue 26), counted
on the wire: every statement sent outside a pipeline is one round trip, one pipeline
(however many statements it holds) is one.

Hand count of a warm hybrid search (lexical index cached, embedder chosen by the store's
recorded settings): 1. the collection and its settings in one statement
(``collection_with_settings``), 2. the arms' pipeline (the collection check and the dense
statement; BM25 in process), 3. the page's chunk rows. Settings are still read on every
search: a write to them is seen by the next search.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from plait.collection_settings import write_settings
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.testing.pg import postgres_dsn


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


class _Wire:
    """Statements sent and round trips made by every psycopg connection meanwhile."""

    def __init__(self) -> None:
        self.trips: list[list[str]] = []


@contextmanager
def _counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Wire]:
    wire = _Wire()
    execute = psycopg.Connection.execute
    pipeline = psycopg.Connection.pipeline

    def counted_execute(self: psycopg.Connection, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self)
        if self._pipeline is None:
            wire.trips.append([text])
        else:
            wire.trips[-1].append(text)
        return execute(self, query, *args, **kwargs)

    @contextmanager
    def counted_pipeline(self: psycopg.Connection) -> Iterator[Any]:
        if self._pipeline is None:
            wire.trips.append([])
        with pipeline(self) as p:
            yield p

    monkeypatch.setattr(psycopg.Connection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "pipeline", counted_pipeline)
    yield wire
    monkeypatch.undo()


def _corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nalpha retrieval engine number {i} word{i % 3}\n")
    return docs


def test_a_warm_hybrid_search_is_three_round_trips(
    store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexing = PostgresStore(store.dsn, schema=store.schema)  # another process, as it were
    with Plait(indexing, embedder="fake") as indexer:
        indexer.index(_corpus(tmp_path), collection="c")
    with Plait(store) as plait:  # the embedder comes from the collection's recorded settings
        first = plait.search("alpha retrieval", collection="c", k=3)
        plait.search("alpha retrieval", collection="c", k=3)  # warm
        with _counting(monkeypatch) as wire:
            result = plait.search("alpha retrieval", collection="c", k=3)
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in first.hits]
    assert len(result.hits) == 3 and result.vector_available
    assert len(wire.trips) == 3, wire.trips
    assert len(wire.trips[0]) == 1 and "p.settings" in wire.trips[0][0]
    assert len(wire.trips[1]) == 2  # the check and the dense statement, one pipeline
    assert "plait_collections" in wire.trips[1][0] and "vector" in wire.trips[1][1]
    assert len(wire.trips[2]) == 1 and "c.content" in wire.trips[2][0]


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


def test_an_ask_reads_its_collection_in_one_statement_besides_its_search(
    store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # by hand: the ask reads the collection and its settings in one statement
    # (collection_with_settings: gate check, changedSince, ask settings), its search one
    # more (as above); it read them in 6 (the service's existence check, ensure_gate's
    # two, the share's two, the search's)
    with Plait(store, embedder="fake", llm="none") as plait:
        plait.index(_corpus(tmp_path), collection="c")
        plait.ask("What is alpha retrieval engine number 3?", collection="c")  # warm
        with _counting(monkeypatch) as wire:
            plait.ask("What is alpha retrieval engine number 3?", collection="c")
    # the collection's row (get_collection, collection_with_settings) or its settings;
    # not the lexical arm's generation checks (one per content word of unknown_terms)
    reads = [
        t[0] for t in wire.trips
        if len(t) == 1 and (t[0].startswith("SELECT p.name") or t[0].startswith("SELECT settings FROM"))
    ]
    assert len(reads) == 2, reads
    assert all("p.settings" in statement for statement in reads)  # both collection_with_settings
