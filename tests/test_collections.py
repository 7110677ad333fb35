"""Named collections in one store are fully isolated; listing and deleting them."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from git_helpers import make_repo
from plait.api.keys import KeyStore
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait

runner = CliRunner()


def _repos(tmp_path: Path) -> tuple[Path, Path]:
    """Two repositories with the same paths (hence the same chunk ids) and different words."""
    alpha = make_repo(tmp_path / "alpha", {
        "README.md": "# Readme\n\nzebra ERR-4012 alpha edition\n",
        "docs/adr/0001.md": "# Decision\n\nzebra crossing alpha\n",
    })  # fmt: skip
    beta = make_repo(tmp_path / "beta", {
        "README.md": "# Readme\n\nzebra ERR-4012 beta edition\n",
        "docs/adr/0001.md": "# Decision\n\nzebra crossing beta\n",
        "docs/extra.md": "# Extra\n\nzebra beta only\n",
    })  # fmt: skip
    return alpha, beta


def test_a_search_in_one_collection_never_returns_another_ones_chunks(tmp_path: Path) -> None:
    alpha, beta = _repos(tmp_path)
    store = str(tmp_path / "p.db")
    with (
        Plait(store, embedder=FakeEmbedder(dimension=64)) as engine,
        Plait(store, embedder=FakeEmbedder(dimension=32, model="hash-32")) as other,
    ):
        engine.index(alpha, collection="alpha")
        other.index(beta, collection="beta")
        for query in ("zebra", "ERR-4012", "beta edition", "alpha crossing"):
            a = engine.search(query, collection="alpha", k=10).hits
            b = other.search(query, collection="beta", k=10).hits
            assert len(a) == 2 and len(b) == 3
            assert all("alpha" in h.content and "beta" not in h.content for h in a)
            assert all("beta" in h.content and "alpha" not in h.content for h in b)
        listed = {c.name: c for c in engine.collections()}
        assert sorted(listed) == ["alpha", "beta"]
        assert (listed["alpha"].embedder_model, listed["alpha"].dimension, listed["alpha"].chunks) == ("hash-64", 64, 2)
        assert (listed["beta"].embedder_model, listed["beta"].dimension, listed["beta"].chunks) == ("hash-32", 32, 3)
        # reindexing one never touches the other, even with the same source ids
        report = engine.reindex(collection="alpha")
        assert (report.chunks_unchanged, report.chunks_deleted) == (2, 0)
        assert engine.collections()[1].chunks == 3
        coverage = other.coverage(collection="beta")
        assert [r.path for r in coverage.roots] == [str(beta.resolve())]


def test_deleting_a_collection_removes_all_of_it(tmp_path: Path) -> None:
    alpha, beta = _repos(tmp_path)
    store = str(tmp_path / "p.db")
    for name, repo in (("alpha", alpha), ("beta", beta)):
        result = runner.invoke(app, ["index", str(repo), "-c", name, "--store", store, "--embedder", "fake"])
        assert result.exit_code == 0, result.output
    listed = json.loads(runner.invoke(app, ["collections", "--store", store, "--json"]).stdout)
    assert [(c["name"], c["chunks"], c["sources"]) for c in listed] == [("alpha", 2, 2), ("beta", 3, 3)]
    keys = KeyStore(tmp_path / "keys.db")  # the key file `plait keys` uses for this store
    beta_key, beta_token = keys.create(role="reader", collection="beta")
    alpha_key, _ = keys.create(role="reader", collection="alpha")
    all_key, _ = keys.create(role="admin", collection="*")
    result = runner.invoke(app, ["delete-collection", "beta", "--store", store], input="n\n")
    assert result.exit_code == 1  # declined: nothing deleted, no key revoked
    assert keys.authenticate(beta_token) is not None
    result = runner.invoke(app, ["delete-collection", "beta", "--yes", "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "name": "beta", "deleted": True, "chunks": 3, "sources": 3, "revokedKeys": [beta_key.id]
    }
    # a later collection named beta does not inherit the old grant; other keys stay
    assert keys.authenticate(beta_token) is None
    active = {k.id for k in keys.list_keys(include_revoked=False)}
    assert active == {alpha_key.id, all_key.id}
    keys.close()
    listed = json.loads(runner.invoke(app, ["collections", "--store", store, "--json"]).stdout)
    assert [c["name"] for c in listed] == ["alpha"]
    with Plait(store) as engine:
        assert engine.store.get_settings("alpha")["roots"][0]["path"] == str(alpha.resolve())
        assert len(engine.search("zebra", collection="alpha").hits) == 2
        # nothing of beta is left behind: re-creating it starts empty, with no roots
        engine.store.ensure_collection("beta")
        assert engine.store.get_settings("beta") == {}
        assert engine.store.chunk_ids("beta") == [] and engine.store.list_sources("beta") == []
    result = runner.invoke(app, ["delete-collection", "beta-missing", "--yes", "--store", store])
    assert result.exit_code == 1 and "collection 'beta-missing' does not exist" in result.stderr
