"""A search's first statement sent ahead on the PostgreSQL store (issue 26,
:mod:`plait.stores.postgres_ahead`): the search runs on the collection's row as last read
while the statement is in flight, and is run again when the statement brings back
anything else — so every write committed before a search began is seen by it, whichever
store object (process) wrote it. Also the sources count cached per collection key
(:mod:`plait.stores.postgres_info`).

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import plait.stores.postgres_ahead as ahead
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ModelMismatchError, NotFoundError, StoreUnavailableError
from plait.events import EngineListener
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_keys import CHECK, GENERATION
from plait.testing.pg import postgres_dsn, throwaway_schema
from plait.testing.pg_wire import round_trips
from plait.types import SearchResult
from slow_queries import SlowQueries


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-ahead-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_ahead_") as name:
        yield name


def _docs(tmp_path: Path, name: str, texts: list[str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for i, text in enumerate(texts):
        (folder / f"{name}{i}.md").write_text(f"# {name} {i}\n\n{text}\n")
    return folder


def _corpus(tmp_path: Path) -> Path:
    return _docs(tmp_path, "d", [f"alpha retrieval engine number {i} word{i % 3}" for i in range(12)])


class _Log:
    """What the store did, in order: statements sent ahead or read, answers received, arms run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: PostgresStore) -> None:
        self.events: list[str] = []
        send, receive, take, arms = ahead.send, ahead._receive, ahead._take, store.search_arms

        def logged_send(conn: psycopg.Connection, params: Any, *, prepared: bool) -> None:
            self.events.append("send")
            send(conn, params, prepared=prepared)

        def logged_receive(conn: psycopg.Connection) -> Any:
            self.events.append("receive")
            return receive(conn)

        def logged_take(answer: Any) -> Any:
            self.events.append("receive")
            return take(answer)

        def logged_arms(*args: Any, **kwargs: Any) -> Any:
            self.events.append("arms")
            return arms(*args, **kwargs)

        monkeypatch.setattr(ahead, "send", logged_send)
        monkeypatch.setattr(ahead, "_receive", logged_receive)
        monkeypatch.setattr(ahead, "_take", logged_take)
        monkeypatch.setattr(store, "search_arms", logged_arms)


def test_a_warm_search_runs_while_its_statement_is_in_flight(
    pg_dsn: str, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(pg_dsn, schema=schema)
    with Plait(store, embedder=FakeEmbedder(dimension=16, model="hash-16")) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        first = plait.search("alpha retrieval", collection="c", k=3)  # reads and waits
        log = _Log(monkeypatch, store)
        warm = plait.search("alpha retrieval", collection="c", k=3)
        # by hand: sent, then both arms from the caches, then the answer read (and equal)
        assert log.events == ["send", "arms", "receive"]
        assert [h.chunk_id for h in warm.hits] == [h.chunk_id for h in first.hits]
        assert [h.score for h in warm.hits] == [h.score for h in first.hits]


def test_a_write_by_another_store_runs_the_search_again_and_is_seen(
    pg_dsn: str, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(reader, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        assert plait.search("zebra", collection="c", k=3, mode="lexical").hits == []
        indexer.index(_docs(tmp_path, "z", ["zebra alpha retrieval"]), collection="c")
        log = _Log(monkeypatch, reader)
        hits = plait.search("zebra", collection="c", k=3, mode="lexical").hits
        # by hand: sent ahead with the old row, the arm run on it (no zebra cached: its
        # pipeline reads the answer first, the pool's connection given back), the answer
        # differs (new generation): the search again, reading and waiting
        assert log.events == ["send", "arms", "receive", "send", "receive", "arms"]
        assert [h.content for h in hits] == ["# z 0\n\nzebra alpha retrieval"]


def test_settings_written_by_another_store_are_seen_by_the_next_search(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(reader, embedder=embedder) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        assert plait.search("alpha retrieval", collection="c", k=3).fusion.method == "adaptive"
        assert plait.search("alpha retrieval", collection="c", k=3).fusion.method == "adaptive"
        writer.update_settings("c", {"fusion": {"method": "rrf"}})  # moves neither generation nor revision
        assert plait.search("alpha retrieval", collection="c", k=3).fusion.method == "rrf"
    writer.close()


def test_a_collection_deleted_by_another_store_is_not_found(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(reader, embedder=embedder) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        assert len(plait.search("alpha retrieval", collection="c", k=3).hits) == 3
        assert writer.delete_collection("c")
        with pytest.raises(NotFoundError):
            plait.search("alpha retrieval", collection="c", k=3)  # not the cached hits
    writer.close()


def test_an_error_raised_on_the_old_row_gives_way_to_the_new_one(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """The collection re-created by another store with this reader's embedder: the search
    sent ahead runs on the old row (another model: refused), the answer differs, and the
    search run again on the new row answers."""
    corpus = _corpus(tmp_path)
    with Plait(PostgresStore(pg_dsn, schema=schema), embedder=FakeEmbedder(dimension=16, model="old-16")) as old:
        old.index(corpus, collection="c")
    with Plait(PostgresStore(pg_dsn, schema=schema), embedder=FakeEmbedder(dimension=16, model="new-16")) as plait:
        with pytest.raises(ModelMismatchError):
            plait.search("alpha retrieval", collection="c", k=3)  # the row is now this store's last
        with Plait(PostgresStore(pg_dsn, schema=schema), embedder=FakeEmbedder(dimension=16, model="new-16")) as new:
            new.store.delete_collection("c")
            new.index(corpus, collection="c")
        assert len(plait.search("alpha retrieval", collection="c", k=3).hits) == 3


def test_a_pool_of_one_connection_serves_a_search_that_reads_more(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """The statement in flight holds the only connection; the arms then read (a filtered
    search reads the row ids its filter lets through): the answer is read first and the
    connection given back, so the arms' read does not wait for a second connection (it
    would time out)."""
    store = PostgresStore(pg_dsn, schema=schema, min_connections=1, max_connections=1, connect_timeout=1)
    with Plait(store, embedder=FakeEmbedder(dimension=16, model="hash-16")) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        plait.search("alpha retrieval", collection="c", k=3)
        hits = plait.search("word1 engine", collection="c", k=3, mode="lexical", scopes=["docs"]).hits
        assert len(hits) == 3 and all("word1" in h.content for h in hits)


def test_the_sources_count_follows_writes_by_another_store(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer:
        indexer.index(_corpus(tmp_path), collection="c")
        first = reader.get_collection("c")
        assert first is not None and first.sources == 12
        again = reader.get_collection("c")  # counted from the cache: same key
        assert again == first
        indexer.index(_docs(tmp_path, "z", ["zebra one", "zebra two"]), collection="c")
        grown = reader.get_collection("c")
        assert grown is not None and grown.sources == 14 and grown.chunks == first.chunks + 2
        writer.delete_source("c", "z0.md")
        both = reader.collection_with_settings("c")
        assert both is not None and both[0].sources == 13
        writer.delete_collection("c")
        assert reader.get_collection("c") is None
        writer.ensure_collection("c")  # re-created, empty: another id
        empty = reader.get_collection("c")
        assert empty is not None and empty.sources == 0 and empty.chunks == 0
    reader.close()


def test_after_a_write_the_lexical_index_advances_in_the_arms_round_trip(
    pg_dsn: str, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search scope read the new generation first: the arms' one pipeline carries the
    change log and the added rows with its check (one snapshot), instead of a second
    round trip after it (the store's own ``lexical_search``, outside a scope, still makes it)."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(reader, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        before = plait.search("alpha retrieval", collection="c", k=3, mode="lexical")
        indexer.index(_docs(tmp_path, "z", ["alpha retrieval zebra alpha"]), collection="c")
        with round_trips() as wire:
            after = plait.search("alpha retrieval", collection="c", k=3, mode="lexical")
        pipelines = wire.pipelines
        arms = [p for p in pipelines if any("plait_changes" in q for q in p)]
        assert len(arms) == 1 and any(q == CHECK for q in arms[0]), pipelines  # the search's check
        assert not any(q == GENERATION for p in pipelines for q in p)  # no second read of the key
        assert after.hits[0].content.endswith("alpha retrieval zebra alpha") and before.hits[0].chunk_id != after.hits[0].chunk_id
        assert len(reader._cached(reader._known["c"][0])[1].rowids) == 13  # type: ignore[index]  # advanced, not reloaded


def test_a_query_reading_postings_after_a_write_reads_them_once_in_one_round_trip(
    pg_dsn: str, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 26): outside a search scope, a query with a term the cached index
    lacks, right after another store's write, read that term's postings with its check,
    found the generation moved, and read them again with the change log in a second round
    trip (at 100k chunks, two 25-47 ms postings reads). The change log now rides in the
    snapshot the postings are read in: one pipeline, the postings read once. (``whole_bytes=0``:
    a collection this small is otherwise read whole, and no term is ever missing.)"""
    reader, writer = PostgresStore(pg_dsn, schema=schema, whole_bytes=0), PostgresStore(pg_dsn, schema=schema)
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    with Plait(writer, embedder=embedder) as indexer:
        indexer.index(_corpus(tmp_path), collection="c")
        assert reader.lexical_search("c", ["alpha"], [], limit=3)  # cached: the index and "alpha"
        indexer.index(_docs(tmp_path, "z", ["alpha retrieval zebra alpha"]), collection="c")
        with round_trips() as wire:
            got = reader.lexical_search("c", ["alpha", "zebra"], [], limit=3)  # "zebra": not cached
        pipelines = wire.pipelines
        postings = [q for p in pipelines for q in p if "plait_postings" in q]
        assert len(pipelines) == 1 and len(postings) == 1, pipelines
        assert any("plait_changes" in q for q in pipelines[0]) and not any(q == GENERATION for q in pipelines[0])
        fresh = PostgresStore(pg_dsn, schema=schema)
        assert got and got == fresh.lexical_search("c", ["alpha", "zebra"], [], limit=3)  # exact: a fresh store's
        fresh.close()
        assert len(reader._cached(reader._known["c"][0])[1].rowids) == 13  # type: ignore[index]  # advanced
    reader.close()


def test_a_store_in_a_process_with_over_1024_open_files(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """The pool's sockets get descriptors >= 1024 (FD_SETSIZE, which ``select.select``
    refuses): the statement sent ahead and the collection read still wait for their
    answers (review-7 #6)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 2048:
        if hard != resource.RLIM_INFINITY and hard < 2048:
            pytest.skip(f"the hard limit on open files is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        store = PostgresStore(pg_dsn, schema=schema, min_connections=1, max_connections=1)
        with Plait(store, embedder=FakeEmbedder(dimension=16, model="hash-16")) as plait:
            plait.index(_corpus(tmp_path), collection="c")
            with store._read() as conn:
                assert conn.pgconn.socket >= 1024
            info = store.get_collection("c")
            assert info is not None and info.chunks == 12
            assert len(plait.search("alpha retrieval", collection="c", k=3).hits) == 3  # read and waited
            assert len(plait.search("alpha retrieval", collection="c", k=3).hits) == 3  # sent ahead
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_threads_sharing_a_small_pool_while_another_store_writes(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """Four threads search through one store whose pool has two connections while another
    store writes: no search waits for a connection it can never get (a thread holds one at
    a time), none fails, and once the writes are committed every thread's next search sees
    the last one."""
    import threading

    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader = PostgresStore(pg_dsn, schema=schema, min_connections=1, max_connections=2, connect_timeout=5)
    writer = PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(reader, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        plait.search("alpha retrieval", collection="c", k=3)
        errors: list[BaseException] = []

        def searching() -> None:
            try:
                for i in range(15):
                    plait.search(f"alpha retrieval word{i % 3}", collection="c", k=3)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=searching) for _ in range(4)]
        for t in threads:
            t.start()
        for g in range(3):
            indexer.index(_docs(tmp_path, f"w{g}", [f"alpha retrieval quagga{g}"]), collection="c")
        for t in threads:
            t.join()
        assert errors == []
        seen: list[list[str]] = []

        def last() -> None:
            seen.append([h.content for h in plait.search("quagga2", collection="c", k=1, mode="lexical").hits])

        checkers = [threading.Thread(target=last) for _ in range(4)]
        for t in checkers:
            t.start()
        for t in checkers:
            t.join()
        assert seen == [["# w2 0\n\nalpha retrieval quagga2"]] * 4


def test_the_connection_sent_ahead_is_back_in_the_pool_while_the_query_is_embedded(
    pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """A pool of one connection; a search sent ahead waits 2 s for its query vector: another
    thread's read gets the connection at once, not after the embedding (review-7 #3: it
    waited for the pool and timed out after connect_timeout=1 s)."""
    store = PostgresStore(pg_dsn, schema=schema, min_connections=1, max_connections=1, connect_timeout=1)
    embedder = SlowQueries(dimension=16, model="hash-16")
    with Plait(store, embedder=embedder) as plait:
        plait.index(_corpus(tmp_path), collection="c")
        plait.search("alpha retrieval", collection="c", k=3)  # the row is now this store's last
        embedder.delay = 2.0
        found: list[int] = []
        search = threading.Thread(target=lambda: found.append(len(plait.search("engine number", collection="c", k=3).hits)))
        search.start()
        time.sleep(0.4)  # the search is waiting for its query vector, its statement answered
        start = time.monotonic()
        info = store.get_collection("c")
        store.ping()  # readiness too (raises StoreUnavailableError when no connection comes)
        waited = time.monotonic() - start
        search.join()
        assert info is not None and info.chunks == 12
        assert waited < 0.9, waited  # connect_timeout is 1 s: it did not wait for the pool
        assert found == [3]


def test_a_search_on_a_closed_store_raises_store_unavailable(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """The statement would be sent ahead (the row is the store's last), but the pool is
    closed: StoreUnavailableError (HTTP 503), not psycopg_pool's bare PoolClosed (review-7 #2)."""
    store = PostgresStore(pg_dsn, schema=schema)
    plait = Plait(store, embedder=FakeEmbedder(dimension=16, model="hash-16"))
    plait.index(_corpus(tmp_path), collection="c")
    assert len(plait.search("alpha retrieval", collection="c", k=3).hits) == 3
    store.close()
    with pytest.raises(StoreUnavailableError):
        plait.search("alpha retrieval", collection="c", k=3)


def test_any_error_of_the_run_on_the_old_row_gives_way_to_the_new_one(
    pg_dsn: str, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only a PlaitError (review-7 #8): the run on the old row raises something else
    (here a RuntimeError from the arms, once), the answer differs (another store wrote): the
    search runs again and answers. With nothing written meanwhile, the error is the search's
    own and is raised."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(reader, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        plait.search("zebra", collection="c", k=3, mode="lexical")
        arms = reader.search_arms
        failures: list[int] = []

        def failing_once(*args: Any, **kwargs: Any) -> Any:
            if not failures:
                failures.append(1)
                raise RuntimeError("failed on the old row")
            return arms(*args, **kwargs)

        monkeypatch.setattr(reader, "search_arms", failing_once)
        indexer.index(_docs(tmp_path, "z", ["zebra alpha retrieval"]), collection="c")
        hits = plait.search("zebra", collection="c", k=3, mode="lexical").hits
        assert failures == [1] and [h.content for h in hits] == ["# z 0\n\nzebra alpha retrieval"]
        failures.clear()
        with pytest.raises(RuntimeError, match="failed on the old row"):
            plait.search("zebra", collection="c", k=3, mode="lexical")  # held: its own error
    writer.close()


def test_a_qa_first_search_after_a_write_is_run_and_reported_once(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """qaFirst without a matching card falls back to a hybrid search (search_request again):
    after a write by another store, that fallback runs again once, inside itself, and the
    ``searched`` event fires once (review-7 #5: the outer attempt ran the whole qa-first
    path again, and ``searched`` fired twice)."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, writer = PostgresStore(pg_dsn, schema=schema), PostgresStore(pg_dsn, schema=schema)
    with Plait(writer, embedder=embedder) as indexer, Plait(reader, embedder=embedder) as plait:
        indexer.index(_corpus(tmp_path), collection="c")
        plait.search("alpha retrieval", collection="c", k=3)  # the row is now the reader's last
        searched: list[str] = []

        class Counting(EngineListener):
            def searched(self, collection: str, result: SearchResult) -> None:
                searched.append(result.query)

        listener = Counting()  # held weakly by the engine
        plait.events.subscribe(listener)
        indexer.index(_docs(tmp_path, "z", ["zebra alpha retrieval"]), collection="c")
        result = plait.search_request("c", {"query": "zebra", "k": 3, "qaFirst": True, "mode": "lexical"})
        assert result.answered_by != "card" and [h.content for h in result.hits] == ["# z 0\n\nzebra alpha retrieval"]
        assert searched == ["zebra"]
    writer.close()
