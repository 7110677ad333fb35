"""Which kind of root a path becomes (plait.sources.roots.describe_root)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from plait.cli import app
from plait.sources.roots import describe_root


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what is plait"}) + "\n", encoding="utf-8")
    (folder / "README.md").write_text("# A dataset\n\nAbout the dataset.\n", encoding="utf-8")
    rows = [{"_id": "d1", "title": "Plait", "text": "plait fuses two rankings"}, {"_id": "d2", "text": "other"}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_a_beir_dataset_folder_is_its_corpus(tmp_path: Path) -> None:
    """``plait index DATASET_DIR`` indexed the dataset's README and skipped corpus.jsonl
    without a word; a folder with corpus.jsonl, queries.jsonl and qrels/ is its corpus."""
    folder = _beir(tmp_path / "ds")
    assert describe_root(folder) == {"kind": "jsonl", "path": str((folder / "corpus.jsonl").resolve()), "scope": "docs"}
    (folder / "queries.jsonl").unlink()  # no longer the BEIR layout: an ordinary folder
    assert describe_root(folder)["kind"] == "folder"


def test_indexing_a_beir_folder_from_the_cli_indexes_its_documents(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "ds")
    db = str(tmp_path / "p.db")
    done = CliRunner().invoke(app, ["index", str(folder), "--store", db, "--embedder", "fake", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["sourcesSeen"], report["sourcesIndexed"], report["chunksAdded"]) == (2, 2, 2)
    found = CliRunner().invoke(app, ["search", "fuses rankings", "--store", db, "--embedder", "fake", "--json"])
    assert json.loads(found.stdout)["hits"][0]["origin"]["sourcePath"] == "corpus.jsonl#d1"
