"""Review 8 #1: one store reached under two addresses the address check cannot link (a plain
TCP port forward in front of a real Milvus server) is still refused: the copy asks the storage
whether the target's collection is the source's (a token written through the target, read
through the source), so ``--replace`` never deletes its own source. Real stores only."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from plait.collection_settings import portable_settings
from plait.copying import copy_collection
from plait.errors import ValidationError
from plait.store_identity import PROBE_KEY, is_one_collection, store_sameness
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk


def _forward(target_port: int) -> tuple[int, socket.socket]:
    """A plain TCP forwarder on 127.0.0.1 to ``target_port`` (what docker -p or kubectl
    port-forward is to the server behind it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target_port))
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1]), listener


@pytest.fixture
def forwarded_milvus(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """One milvus-lite gRPC server, opened directly and through a forwarder (prefix "p")."""
    pytest.importorskip("milvus_lite")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    from plait.stores.milvus import MilvusStore

    server, db, port = start_server_in_thread(data_dir=str(tmp_path / "data"), host="127.0.0.1", port=0)
    forwarded, listener = _forward(int(port))
    source = MilvusStore(f"http://127.0.0.1:{port}", prefix="p", records=tmp_path / "a.records.sqlite")
    target = MilvusStore(f"http://127.0.0.1:{forwarded}", prefix="p", records=tmp_path / "b.records.sqlite")
    try:
        yield source, target
    finally:
        source.close()
        target.close()
        listener.close()
        server.stop(grace=0)
        db.close()


def test_replace_through_a_port_forward_is_refused_and_deletes_nothing(forwarded_milvus: tuple[Any, Any]) -> None:
    source, target = forwarded_milvus
    source.ensure_collection("kb")
    source.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
    assert store_sameness(source, target) == "different"  # the addresses cannot tell
    with pytest.raises(ValidationError, match="is the source's collection itself"):
        copy_collection(source, target, "kb", replace=True)
    info = source.get_collection("kb")
    assert info is not None and (info.chunks, info.sources) == (1, 1)
    assert source.chunk_ids("kb") == ["a-0"]
    # the probe is cleared, and a copy of the collection does not carry it
    assert PROBE_KEY not in source.get_settings("kb")
    assert PROBE_KEY not in portable_settings(source, "kb")
    # a copy under another name through the forwarder is still allowed, and the source is intact
    report = copy_collection(source, target, "kb", target_name="kb2")
    assert (report.chunks_copied, report.verification is not None and report.verification.ok) == (1, True)
    assert source.chunk_ids("kb") == ["a-0"] and source.chunk_ids("kb2") == ["a-0"]


def test_two_servers_collections_of_one_name_are_two(tmp_path: Path) -> None:
    """The probe says "another collection" for two real, separate stores: the copy replaces."""
    pytest.importorskip("milvus_lite")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    from plait.stores.milvus import MilvusStore

    one = start_server_in_thread(data_dir=str(tmp_path / "d1"), host="127.0.0.1", port=0)
    two = start_server_in_thread(data_dir=str(tmp_path / "d2"), host="127.0.0.1", port=0)
    source = MilvusStore(f"http://127.0.0.1:{one[2]}", prefix="p", records=tmp_path / "a.records.sqlite")
    target = MilvusStore(f"http://127.0.0.1:{two[2]}", prefix="p", records=tmp_path / "b.records.sqlite")
    try:
        source.ensure_collection("kb")
        target.ensure_collection("kb")
        source.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
        target.replace_source("kb", "old.md", "docs", [make_chunk("o-0", "old", source_id="old.md")])
        if source.get_collection("kb").created_at == target.get_collection("kb").created_at:
            assert not is_one_collection(source, target, "kb", "kb")  # the token decided, not the times
        report = copy_collection(source, target, "kb", replace=True)
        assert report.chunks_copied == 1 and report.verification is not None and report.verification.ok
        assert target.chunk_ids("kb") == ["a-0"] and source.chunk_ids("kb") == ["a-0"]
    finally:
        source.close()
        target.close()
        for server, db, _ in (one, two):
            server.stop(grace=0)
            db.close()


def test_the_probe_sees_one_sqlite_file_and_not_two(tmp_path: Path) -> None:
    a, b, other = SQLiteStore(tmp_path / "one.db"), SQLiteStore(tmp_path / "one.db"), SQLiteStore(tmp_path / "two.db")
    try:
        a.ensure_collection("kb")
        other.ensure_collection("kb")
        assert is_one_collection(a, b, "kb", "kb") is True
        assert is_one_collection(a, other, "kb", "kb") is False
        assert is_one_collection(a, b, "kb", "nothing") is False  # no such collection on the target
    finally:
        for store in (a, b, other):
            store.close()


def test_the_probe_sees_one_postgres_schema_and_not_two(pg_dsn: str) -> None:
    schemas = ["plait_probe_a", "plait_probe_b"]
    a, b, other = PostgresStore(pg_dsn, schema=schemas[0]), PostgresStore(pg_dsn, schema=schemas[0]), PostgresStore(
        pg_dsn, schema=schemas[1]
    )
    try:
        a.ensure_collection("kb")
        other.ensure_collection("kb")
        assert is_one_collection(a, b, "kb", "kb") is True
        assert is_one_collection(a, other, "kb", "kb") is False
    finally:
        for store in (a, b, other):
            store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_verification_never_vouches_for_a_copy_that_emptied_its_source(
    forwarded_milvus: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line of defence, seen with the first switched off: had the guard let the
    replace through (as before the probe), the copy deletes its own source and copies 0
    chunks; the verification compared the emptied collection with itself and said ok."""
    import plait.copying

    source, target = forwarded_milvus
    source.ensure_collection("kb")
    source.replace_source("kb", "a.md", "docs", [make_chunk("a-0", "alpha beta", source_id="a.md")])
    monkeypatch.setattr(plait.copying, "is_one_collection", lambda *args: False)
    report = copy_collection(source, target, "kb", replace=True)
    assert report.chunks_copied == 0  # the source was its target: deleted before the copy
    assert report.verification is not None
    assert (report.verification.source_chunks, report.verification.ok) == (0, False)
