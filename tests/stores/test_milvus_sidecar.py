"""A Milvus server store's records sidecar (FAQ cards, refinery runs, API keys) is named
from the address as the copy's same-store guard normalises it
(:func:`plait.store_identity.milvus_address`), so one server and database has one sidecar
however its address is spelt, and two databases of one server have two. A sidecar under
the name an earlier plait gave it is imported once: nothing is lost. A real milvus-lite
gRPC server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from plait.api.keys import KeyStore
from plait.refinery.models import CardMode
from plait.refinery.store import RefineryStore
from plait.stores.milvus import MilvusStore
from plait.stores.milvus_base import _sidecar
from plait.stores.records import open_records_file


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A milvus-lite gRPC server with the databases ``default`` and ``db1``; its port.
    The working folder is ``tmp_path`` (a server's sidecar is in ``./.plait/``)."""
    from milvus_lite.adapter.grpc.server import start_server_in_thread
    from pymilvus import MilvusClient

    monkeypatch.chdir(tmp_path)
    grpc, db, port = start_server_in_thread(data_dir=str(tmp_path / "data"), host="127.0.0.1", port=0)
    client = MilvusClient(uri=f"http://127.0.0.1:{port}")
    client.create_database("db1")
    client.close()
    try:
        yield int(port)
    finally:
        grpc.stop(grace=0)
        db.close()


def test_the_name_follows_the_normalised_address() -> None:
    """Spellings the same-store guard takes for one server and database name one sidecar
    (the https port, a trailing dot, upper case, a scheme or none); databases stay apart."""
    one = {
        _sidecar(u, "p")
        for u in ("https://m.example.com", "https://M.example.com.:443/", "HTTPS://m.example.com:443")
    }
    assert one == {Path(".plait/milvus-m.example.com-443-p.records.sqlite")}
    assert _sidecar("milvus.internal:19530", "p") == _sidecar("http://MILVUS.internal:19530/", "p")
    assert _sidecar("milvus.internal:19530", "p") == Path(".plait/milvus-milvus.internal-19530-p.records.sqlite")
    assert _sidecar("http://h:19530/db1", "p") == Path(".plait/milvus-h-19530-p.db1.records.sqlite")
    assert _sidecar("http://h:19530/default", "p") == _sidecar("http://h:19530", "p")


def test_spellings_of_one_server_share_its_records(server: int) -> None:
    spellings = (f"http://LOCALHOST:{server}", f"http://localhost:{server}/", f"tcp://localhost:{server}")
    first = MilvusStore(spellings[0], prefix="p")
    try:
        _, token = KeyStore(first.records()).create(role="reader", collection="kb")
    finally:
        first.close()
    for uri in spellings[1:]:
        store = MilvusStore(uri, prefix="p")
        try:
            assert store.records_path == first.records_path
            assert KeyStore(store.records()).authenticate(token) is not None
        finally:
            store.close()


def test_two_databases_of_one_server_keep_their_own_records(server: int) -> None:
    """Collection ``kb`` in ``default`` and ``kb`` in ``db1`` are two collections (the copy
    guard says "different"): their cards and keys are not each other's."""
    default = MilvusStore(f"http://127.0.0.1:{server}", prefix="p")
    other = MilvusStore(f"http://127.0.0.1:{server}/db1", prefix="p")
    try:
        default.ensure_collection("kb")
        other.ensure_collection("kb")
        other.records()  # opened (and migrated) first: what default writes next is its own
        _, token = KeyStore(default.records()).create(role="reader", collection="kb")
        RefineryStore(default.records()).add_card("kb", question="q?", answer="a", sources=["c1"], mode=CardMode.EXTRACTIVE)
        assert other.records_path != default.records_path
        assert KeyStore(other.records()).authenticate(token) is None
        assert RefineryStore(other.records()).list_cards("kb") == []
        assert len(RefineryStore(default.records()).list_cards("kb")) == 1
    finally:
        default.close()
        other.close()


def test_a_sidecar_under_the_old_name_is_imported_once(server: int, tmp_path: Path) -> None:
    """An earlier plait named the sidecar of ``…/db1`` without its database (the file every
    database of that server shared): its key and the cards of the collections ``db1``
    holds come into the new sidecar, once; the old file is left as it was."""
    old = tmp_path / ".plait" / f"milvus-127.0.0.1-{server}-p.records.sqlite"
    legacy = open_records_file(old)
    _, token = KeyStore(legacy).create(role="reader", collection="kb")
    cards = RefineryStore(legacy)
    mine = cards.add_card("kb", question="mine?", answer="a", sources=["c1"], mode=CardMode.EXTRACTIVE)
    cards.add_card("elsewhere", question="not db1's?", answer="b", sources=["c2"], mode=CardMode.EXTRACTIVE)
    legacy.close()
    before = old.read_bytes()

    store = MilvusStore(f"http://127.0.0.1:{server}/db1", prefix="p")
    try:
        store.ensure_collection("kb")
        assert store.records_path == Path(f".plait/milvus-127.0.0.1-{server}-p.db1.records.sqlite")
        assert KeyStore(store.records()).authenticate(token) is not None
        assert [c.id for c in RefineryStore(store.records()).list_cards("kb")] == [mine.id]
        assert RefineryStore(store.records()).list_cards("elsewhere") == []
    finally:
        store.close()
    assert old.read_bytes() == before
    again = MilvusStore(f"http://127.0.0.1:{server}/db1/", prefix="p")
    try:
        assert len(KeyStore(again.records()).list_keys()) == 1  # imported once, not twice
        assert len(RefineryStore(again.records()).list_cards("kb")) == 1
    finally:
        again.close()
