"""Review 1 of the copy work (issue 27): a resumed copy into PostgreSQL does not rebuild
the HNSW index before copying (finding 1); the deferred-index drop stalls no other
collection and Ctrl-C builds nothing (4); a copy within one store never moves or deletes
the source (3); usage rows are added exactly once (7)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from plait.api.keys import KeyStore
from plait.copying import copy_collection, verify_copy
from plait.errors import ValidationError
from plait.refinery.store import RefineryStore
from plait.stores.base import SourceWrite
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.usage import UsageRow

from .conftest import StoreFactory
from .test_copy import USAGE, fill

DIM = 64


def _hnsw(dsn: str, schema: str) -> list[bool]:
    """Validity of each HNSW index in ``schema``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname LIKE 'plait_chunks_hnsw_%%' AND c.relnamespace = %s::regnamespace",
            (schema,),
        ).fetchall()
    return [bool(r[0]) for r in rows]


def _big_source(path: Path, sources: int, per_source: int) -> SQLiteStore:
    rng = np.random.default_rng(0)
    store = SQLiteStore(path)
    store.ensure_collection("kb")
    store.set_embedder("kb", provider="fake", model="m", dimension=DIM)
    for s in range(sources):
        sid = f"d{s:02d}.md"
        vectors = rng.standard_normal((per_source, DIM))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)  # unit length, as embedders give
        store.replace_source("kb", sid, "docs", [
            make_chunk(f"{sid}-{i}", f"alpha beta w{s} p{i}", source_id=sid, vector=list(vectors[i]), ordinal=i)
            for i in range(per_source)
        ])
    return store


class Stop(KeyboardInterrupt):
    """Ctrl-C at a chosen point of the copy."""


def test_a_resumed_copy_into_postgres_builds_the_index_once_at_the_end(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1: 4,000 of 6,000 chunks copied, then Ctrl-C. The resume, under a 1.5 s
    statement timeout, builds no index before copying the rest (setting the model again
    rebuilt the graph over the 4,000 chunks inside one statement: > 1.5 s) and builds it
    once, after the last source is written."""
    dsn = request.getfixturevalue("pg_dsn")
    schema = f"plait_rv_{uuid.uuid4().hex[:10]}"
    source = _big_source(tmp_path / "from.db", 24, 250)
    first = PostgresStore(dsn, schema=schema)
    try:
        def stop_at_16(done: int, total: int, chunks: int) -> None:
            if done == 16:
                raise Stop

        with pytest.raises(Stop):
            copy_collection(source, first, "kb", batch_chunks=1000, progress=stop_at_16)
        half = first.get_collection("kb")
        assert half is not None and (half.sources, half.chunks) == (16, 4000)
        assert _hnsw(dsn, schema) == []  # Ctrl-C builds no index on the way out (finding 4)
        first.close()
        short = PostgresStore(dsn, schema=schema, statement_timeout=1.5)
        try:
            builds: list[int] = []
            real_build = short.build_index

            def counted(collection: str) -> None:
                info = short.get_collection(collection)
                builds.append(info.chunks if info is not None else -1)
                real_build(collection)

            monkeypatch.setattr(short, "build_index", counted)
            models: list[str] = []
            real_set = short.set_embedder

            def set_embedder(name: str, **options: Any) -> Any:
                models.append(name)
                return real_set(name, **options)

            monkeypatch.setattr(short, "set_embedder", set_embedder)

            def no_index_yet(done: int, total: int, chunks: int) -> None:
                assert _hnsw(dsn, schema) == [], f"an HNSW index exists at source {done}"

            report = copy_collection(source, short, "kb", batch_chunks=250, verify=False, progress=no_index_yet)
            assert (report.sources_already_there, report.sources_copied, report.chunks_copied) == (16, 8, 2000)
            assert builds == [6000]  # once, after every chunk was written
            assert models == []  # the model was recorded already: set again, it rebuilt the index
            assert _hnsw(dsn, schema) == [True]
        finally:
            short.close()
        first = PostgresStore(dsn, schema=schema)
        assert verify_copy(source, first, "kb", sample_queries=5).ok
    finally:
        first.close()
        source.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _chunks(source_id: str, n: int) -> list[Any]:
    return [
        make_chunk(f"{source_id}-{i}", f"word{i} text", source_id=source_id, ordinal=i, vector=[1.0, float(i)])
        for i in range(n)
    ]


def test_the_deferred_index_drop_stalls_no_other_collection(make_store: StoreFactory) -> None:
    """Finding 4: a transaction that read plait_chunks stays open. The drop of a's index
    waits for it at most lock_timeout, and meanwhile a query on collection b answers
    (a plain DROP INDEX queued for the table's exclusive lock, and b's query behind it)."""
    pg = make_store("postgres")
    assert isinstance(pg, PostgresStore) and pg.schema is not None
    for name in ("a", "b"):
        pg.ensure_collection(name)
        pg.set_embedder(name, provider="fake", model="m", dimension=2)
        pg.replace_sources(name, [SourceWrite("x.md", "docs", _chunks("x.md", 5))])
    assert _hnsw(pg.dsn, pg.schema) == [True, True]
    path = sql.SQL("SET search_path = {}, public").format(sql.Identifier(pg.schema))
    holder = psycopg.connect(pg.dsn)
    other = psycopg.connect(pg.dsn, autocommit=True)
    try:
        holder.execute(path)
        holder.execute("SELECT count(*) FROM plait_chunks").fetchone()  # open transaction, ACCESS SHARE held
        other.execute(path)
        other.execute("SET statement_timeout = '2s'")
        done = threading.Event()
        failed: list[BaseException] = []

        def drop() -> None:
            try:
                with pg.deferred_index("a"):
                    done.set()
            except BaseException as exc:  # reported below
                failed.append(exc)
                done.set()

        started = time.monotonic()
        worker = threading.Thread(target=drop)
        worker.start()
        for _ in range(100):  # until the drop waits for the holder
            row = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'DROP INDEX%%' AND wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the drop never waited for the open transaction")
        row = other.execute(
            "SELECT count(*) FROM plait_chunks c JOIN plait_collections p ON p.id = c.collection_id WHERE p.name = 'b'"
        ).fetchone()
        assert row == (5,)  # answered while the drop waits
        assert done.wait(30)
        assert time.monotonic() - started < 20  # gave up after lock_timeout (5 s), not the 60 s statement timeout
        holder.rollback()
        worker.join(30)
        assert failed == []
        assert _hnsw(pg.dsn, pg.schema) == [True, True]  # a's index (left invalid by the drop) rebuilt
    finally:
        holder.close()
        other.close()
    with pytest.raises(KeyboardInterrupt), pg.deferred_index("a"):
        raise KeyboardInterrupt
    assert _hnsw(pg.dsn, pg.schema) == [True]  # a's is gone: Ctrl-C builds nothing
    with pg.deferred_index("a"):
        pass
    assert _hnsw(pg.dsn, pg.schema) == [True, True]


def test_a_copy_within_one_store_never_touches_the_source(make_store: StoreFactory, tmp_path: Path) -> None:
    """Finding 3: onto itself (same object, same file, same DSN and schema) is refused, with
    or without replace, and nothing is lost; under another name, the source keeps its
    keys, cards and runs, and the copy gets its own cards and runs."""
    store = make_store("sqlite")
    assert isinstance(store, SQLiteStore)
    token, _ = fill(store)
    n = store.get_collection("kb")
    assert n is not None
    twin = SQLiteStore(store.path)
    try:
        for other in (store, twin):
            for replace in (False, True):
                with pytest.raises(ValidationError, match="same store"):
                    copy_collection(store, other, "kb", replace=replace)
            with pytest.raises(ValidationError, match="itself"):
                verify_copy(store, other, "kb")
    finally:
        twin.close()
    after = store.get_collection("kb")
    assert after is not None and (after.chunks, after.sources) == (n.chunks, n.sources)
    pg = make_store("postgres")
    assert isinstance(pg, PostgresStore)
    pg.ensure_collection("kb")
    pg_twin = PostgresStore(pg.dsn, schema=pg.schema)
    try:
        with pytest.raises(ValidationError, match="same store"):
            copy_collection(pg, pg_twin, "kb", replace=True)
    finally:
        pg_twin.close()
    assert pg.get_collection("kb") is not None

    report = copy_collection(store, store, "kb", target_name="kb2")
    assert report.verification is not None and report.verification.ok
    assert (report.sources_copied, report.runs, report.cards, report.keys) == (n.sources, 1, 1, 0)
    keys = KeyStore(store.records())
    kb_key = keys.authenticate(token)
    assert kb_key is not None and kb_key.collection == "kb"  # not moved to kb2
    assert sorted(k.collection for k in keys.list_keys()) == ["*", "kb", "other"]
    refinery = RefineryStore(store.records())
    old_cards, new_cards = refinery.list_cards("kb"), refinery.list_cards("kb2")
    assert [c.question for c in old_cards] == [c.question for c in new_cards] == ["What does ERR-4012 mean?"]
    assert old_cards[0].id != new_cards[0].id
    old_runs, new_runs = refinery.list_runs("kb"), refinery.list_runs("kb2")
    assert len(old_runs) == len(new_runs) == 1 and old_runs[0].id != new_runs[0].id
    assert old_cards[0].run_id == old_runs[0].id and new_cards[0].run_id == new_runs[0].id
    assert store.usage("kb") == store.usage("kb2") == USAGE
    still = store.get_collection("kb")
    assert still is not None and (still.chunks, still.sources) == (n.chunks, n.sources)


def test_verifying_a_copy_within_one_store_compares_the_two_collections(make_store: StoreFactory) -> None:
    """A rename within one store is verified source collection against target collection
    (not the store against itself, which always agrees): a copy missing a source, through
    another store object on the same file too, is reported with that source."""
    store = make_store("sqlite")
    assert isinstance(store, SQLiteStore)
    fill(store)
    assert copy_collection(store, store, "kb", target_name="kb2").verification is not None
    twin = SQLiteStore(store.path)
    try:
        assert verify_copy(store, twin, "kb", target_name="kb2").ok
        dropped = sorted(s.source_id for s in twin.list_sources("kb2"))[0]
        twin.delete_source("kb2", dropped)
        checked = verify_copy(store, twin, "kb", target_name="kb2")
    finally:
        twin.close()
    assert not checked.ok and checked.checksum_mismatches == [dropped]
    assert checked.target_sources == checked.source_sources - 1


HOUR = "2026-11-30T09:00:00Z"


def test_usage_rows_are_added_exactly_once(make_store: StoreFactory) -> None:
    """Finding 7: interrupted before the usage rows, the target collection makes calls of
    its own in the same hour; the resume adds the source's rows to them (it subtracted
    them). A resume after the rows were written (the marker says so) adds nothing."""
    source, target = make_store("sqlite"), make_store("sqlite")
    source.ensure_collection("kb")
    source.set_embedder("kb", provider="fake", model="m", dimension=2)
    for s in range(3):
        source.replace_source("kb", f"s{s}.md", "docs", [make_chunk(f"s{s}-0", f"text {s}", source_id=f"s{s}.md",
                                                                    vector=[1.0, float(s)])])
    source.add_usage("kb", USAGE)

    def stop_at_2(done: int, total: int, chunks: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_collection(source, target, "kb", progress=stop_at_2)
    assert target.usage("kb") == []
    own = UsageRow(bucket=HOUR, kind="embedding", purpose="index", provider="ollama", model="nomic-embed-text",
                   calls=2, texts=5, characters=1000, input_tokens=300)
    target.add_usage("kb", [own])
    report = copy_collection(source, target, "kb")
    assert report.usage_rows == 2
    assert [(r.bucket, r.calls, r.texts, r.characters, r.input_tokens) for r in target.usage("kb")] == [
        (HOUR, 5, 17, 5800, 1500),  # 3 copied + 2 of its own
        ("2026-11-30T10:00:00Z", 1, 1, 400, 100),
    ]
    # as a copy killed during its verification leaves it: the rows written, the marker set
    target.update_settings("kb", {"copyInProgress": {"collection": "kb", "startedAt": "x", "usageCopied": True}})
    again = copy_collection(source, target, "kb")
    assert (again.sources_already_there, again.usage_rows) == (3, 0)
    assert [r.calls for r in target.usage("kb")] == [5, 1]


def test_a_renamed_copy_leaves_the_target_stores_own_collection_alone(make_store: StoreFactory) -> None:
    """Finding 3, across stores: copying kb as kb2 into a store that holds a kb of its own
    renamed every kb row of the target (UPDATE ... WHERE collection = 'kb')."""
    source, target = make_store("sqlite"), make_store("sqlite")
    copied_token, _ = fill(source)
    own_token, _ = fill(target)
    own_cards = [c.id for c in RefineryStore(target.records()).list_cards("kb")]
    report = copy_collection(source, target, "kb", target_name="kb2")
    assert report.verification is not None and report.verification.ok
    assert (report.runs, report.cards, report.keys) == (1, 1, 2)
    keys = KeyStore(target.records())
    own, copied = keys.authenticate(own_token), keys.authenticate(copied_token)
    assert own is not None and own.collection == "kb"
    assert copied is not None and copied.collection == "kb2"
    refinery = RefineryStore(target.records())
    assert [c.id for c in refinery.list_cards("kb")] == own_cards
    assert [c.id for c in refinery.list_cards("kb2")] == [c.id for c in RefineryStore(source.records()).list_cards("kb")]
    assert target.usage("kb") == target.usage("kb2") == USAGE


def test_a_renamed_copy_whose_card_ids_the_target_holds_is_not_verified(make_store: StoreFactory) -> None:
    """Review 2, finding 2: copying kb into a store that already holds kb (same run and card
    ids), then again as kb2, wrote no card or run (ids are global keys, ON CONFLICT DO
    NOTHING) and still said verified. The verification now counts runs and cards. Review 8
    #4: the copy sees the source's own rows in the target's records and gives kb2's runs and
    cards new ids, so they are written (and verified) instead of dropped."""
    source, target = make_store("sqlite"), make_store("sqlite")
    fill(source)
    first = copy_collection(source, target, "kb")
    assert first.verification is not None and first.verification.ok
    assert first.verification.source_records == first.verification.target_records == [1, 1]
    again = copy_collection(source, target, "kb", target_name="kb2")
    assert (again.runs, again.cards) == (1, 1)  # new ids: the first copy's are taken
    assert again.verification is not None and again.verification.ok, again.verification
    assert (again.verification.source_records, again.verification.target_records) == ([1, 1], [1, 1])
