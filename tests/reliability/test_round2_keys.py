"""Issue 23 D4: deleting a collection revokes the keys scoped to it, in the service and in
every key file (PLAIT_KEYS, keys=, keys.db next to the store) — so an old reader key
cannot read a re-created collection of the same name."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from plait.api.keys import KeyStore
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

from plait.api.http import create_app
from plait.testing.asgi_server import UvicornThread


def _keys(path: Path) -> tuple[str, str, str]:
    keys = KeyStore(path)
    try:
        reader = keys.create(role="reader", collection="docs")[1]
        other = keys.create(role="reader", collection="other")[1]
        everything = keys.create(role="admin", collection="*")[1]
    finally:
        keys.close()
    return reader, other, everything


def _active(path: Path, *tokens: str) -> list[bool]:
    keys = KeyStore(path)
    try:
        return [keys.authenticate(t) is not None for t in tokens]
    finally:
        keys.close()


def test_plait_keys_file_is_revoked_by_the_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "secrets" / "api-keys.db"
    monkeypatch.setenv("PLAIT_KEYS", str(elsewhere))
    reader, other, everything = _keys(elsewhere)
    with Plait(str(tmp_path / "store" / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="docs")
        assert engine.delete_collection("docs") is True
        assert _active(elsewhere, reader, other, everything) == [False, True, True]
        assert not (tmp_path / "store" / "keys.db").exists()  # no key file created to revoke nothing
        engine.index_documents(documents(ARTICLE_DOCS), collection="docs")  # re-created, same name
        keys = KeyStore(elsewhere)
        try:
            with UvicornThread(create_app(engine, keys=keys)) as server:
                response = httpx.post(
                    f"{server.url}/v1/collections/docs/search",
                    json={"query": "ERR-4012"},
                    headers={"Authorization": f"Bearer {reader}"},
                    timeout=30,
                )
                assert response.status_code == 401
        finally:
            keys.close()


def test_a_key_file_given_to_the_engine_and_the_default_one_are_both_revoked(tmp_path: Path) -> None:
    given = tmp_path / "given.db"
    default = tmp_path / "keys.db"
    first = _keys(given)
    second = _keys(default)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), keys=given) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="docs")
        report = engine.delete_collection_report("docs")
    assert report.deleted is True and len(report.revoked_keys) == 2  # one in each file
    assert _active(given, *first) == [False, True, True]
    assert _active(default, *second) == [False, True, True]


def test_the_cli_reports_keys_revoked_in_the_file_it_was_given(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    custom = tmp_path / "k" / "custom.db"
    reader, _, _ = _keys(custom)
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="docs")
    done = CliRunner().invoke(
        app, ["delete-collection", "docs", "--yes", "--store", store, "--keys", str(custom), "--json"], env={"PLAIT_KEYS": ""}
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["revokedKeys"] == [1]
    assert _active(custom, reader) == [False]
