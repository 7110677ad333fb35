"""Issue 23 D9: a SQLite store whose write lock another process holds past the busy
timeout is a one-line StoreUnavailableError (HTTP 503 with Retry-After), not a
traceback or a 500."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import StoreUnavailableError
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore
from plait.testing.corpus import ARTICLE_DOCS, documents

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

from plait.api.http import create_app
from plait.testing.asgi_server import UvicornThread


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[Plait, Path]]:
    path = tmp_path / "p.db"
    with Plait(SQLiteStore(path, timeout=0.3), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        writer = sqlite3.connect(path, isolation_level=None)  # another process's writer
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE collections SET generation = generation")
        try:
            yield engine, path
        finally:
            writer.execute("ROLLBACK")
            writer.close()


def test_a_held_write_lock_is_store_unavailable(locked: tuple[Plait, Path]) -> None:
    engine, path = locked
    expected = (
        f"SQLite store {path} is busy: another process has held its write lock for more than 0.3 s "
        "(database is locked); try again later"
    )
    with pytest.raises(StoreUnavailableError) as caught:
        engine.index_documents(documents({"new-1": "NEW-1 text"}))
    assert str(caught.value) == expected
    with pytest.raises(StoreUnavailableError, match="is busy"):
        engine.delete_collection("default")
    assert engine.search("ERR-4012").hits[0].metadata["docId"] == "kb-101"  # readers still read (WAL)


def test_over_http_it_is_a_503_with_retry_after(locked: tuple[Plait, Path]) -> None:
    engine, _ = locked
    with UvicornThread(create_app(engine, auth=False)) as server:
        response = httpx.post(
            f"{server.url}/v1/collections/default/reindex", headers={"X-Plait-Request": "1"}, timeout=30
        )
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        assert "is busy: another process has held its write lock" in response.json()["error"]
        search = httpx.post(f"{server.url}/v1/collections/default/search", json={"query": "ERR-4012"}, timeout=30)
        assert search.status_code == 200
