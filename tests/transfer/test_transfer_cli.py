"""``plait copy / export / import / backup`` on the command line (thin adapters)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents

runner = CliRunner()


def test_copy_export_import_backup_commands(tmp_path: Path) -> None:
    source = str(tmp_path / "from.db")
    with Plait(source, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.index_documents(documents({"z": "zebra crossing"}), collection="other")
    target = str(tmp_path / "to.db")
    done = runner.invoke(app, ["copy", "--from", source, "--to", target, "-c", "kb", "--json"])
    assert done.exit_code == 0, done.output
    [report] = json.loads(done.stdout)
    assert (report["collection"], report["chunksCopied"], report["verification"]["ok"]) == ("kb", 5, True)
    again = runner.invoke(app, ["copy", "--from", source, "--to", target, "-c", "kb"])
    assert again.exit_code == 1 and "already holds 5 chunks of 5 sources: pass --replace" in " ".join(again.output.split())
    everything = runner.invoke(app, ["copy", "--store", source, "--to", target, "--replace", "--json"])
    assert [r["collection"] for r in json.loads(everything.stdout)] == ["kb", "other"]
    archive = tmp_path / "kb.jsonl.zst"
    out = runner.invoke(app, ["export", "--store", source, "-c", "kb", "-o", str(archive), "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["chunks"] == 5
    third = str(tmp_path / "third.db")
    back = runner.invoke(app, ["import", str(archive), "--store", third, "--json"])
    assert back.exit_code == 0 and json.loads(back.stdout)["vectors"] == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "plait-collection", "version": 9}\n', encoding="utf-8")
    refused = runner.invoke(app, ["import", str(bad), "--store", third])
    assert refused.exit_code == 1 and "line 1: format version 9 is not supported" in " ".join(refused.output.split())
    snap = tmp_path / "snap.db"
    saved = runner.invoke(app, ["backup", "--store", source, "-o", str(snap), "--json"])
    assert saved.exit_code == 0 and json.loads(saved.stdout)["bytes"] == snap.stat().st_size
    with Plait(str(snap), embedder=FakeEmbedder(dimension=16)) as restored:
        assert [c.name for c in restored.collections()] == ["kb", "other"]


def test_copy_from_a_store_to_itself_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    """Review 1, finding 3: ``--replace`` deleted the collection, then copied nothing from it."""
    source = tmp_path / "kb.db"
    with Plait(str(source), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    same = str(tmp_path / "." / "kb.db")
    refused = runner.invoke(app, ["copy", "--from", str(source), "--to", same, "-c", "kb", "--replace"])
    assert refused.exit_code == 1
    assert "the source and the target are the same store" in " ".join(refused.output.split())
    with Plait(str(source), embedder=FakeEmbedder(dimension=16)) as engine:
        [kb] = engine.collections()
        assert (kb.name, kb.chunks, kb.sources) == ("kb", 5, 5)


def test_copy_as_another_name_within_one_store(tmp_path: Path) -> None:
    """``plait copy --as NAME``: the only way to copy within one store from the CLI."""
    store = str(tmp_path / "kb.db")
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.index_documents(documents({"z": "zebra crossing"}), collection="other")
    done = runner.invoke(app, ["copy", "--store", store, "--to", store, "-c", "kb", "--as", "kb2", "--json"])
    assert done.exit_code == 0, done.output
    [report] = json.loads(done.stdout)
    assert (report["collection"], report["targetCollection"], report["chunksCopied"]) == ("kb", "kb2", 5)
    assert report["verification"]["ok"] is True
    human = runner.invoke(app, ["copy", "--store", store, "--to", store, "-c", "other", "--as", "other2"])
    assert human.exit_code == 0 and "other -> other2: 1 sources copied" in " ".join(human.output.split())
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        counts = {c.name: (c.chunks, c.sources) for c in engine.collections()}
    assert counts == {"kb": (5, 5), "kb2": (5, 5), "other": (1, 1), "other2": (1, 1)}
    for args in (["--as", "x"], ["-c", "kb", "-c", "other", "--as", "x"]):
        refused = runner.invoke(app, ["copy", "--store", store, "--to", store, *args])
        assert refused.exit_code == 1
        assert "--as NAME needs exactly one --collection" in refused.output
        assert len(refused.output.strip().splitlines()) == 1
