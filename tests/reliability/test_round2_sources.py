"""Issue 23, sources: a symlink loop is a skip with a reason (D2); an emptied or
unreadable root deletes nothing unless allowed (D7)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from git_helpers import commit_all, make_repo
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait


def _loop(root: Path) -> None:
    (root / "l1.md").symlink_to("l2.md")
    (root / "l2.md").symlink_to("l1.md")


@pytest.mark.parametrize("kind", ["folder", "git"])
def test_a_symlink_loop_is_skipped_with_a_reason(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "docs"
    if kind == "git":
        make_repo(root, {"good.md": "# Good\n\nGOOD-1 inside"})
        _loop(root)
        commit_all(root, "loop")
    else:
        root.mkdir()
        (root / "good.md").write_text("# Good\n\nGOOD-1 inside", encoding="utf-8")
        _loop(root)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        assert report.sources_indexed == 1
        assert {s.path: s.reason for s in report.skipped} == {
            "l1.md": "unreadable: symlink loop",
            "l2.md": "unreadable: symlink loop",
        }
        again = engine.reindex()
        assert {s.path for s in again.skipped} == {"l1.md", "l2.md"}
        assert [s.source_id for s in engine.store.list_sources("default")] == ["good.md"]
        coverage = engine.coverage()
        assert coverage.model_dump(by_alias=True)["scopes"][0]["sourcesPresent"] == 1
        result = engine.explain("GOOD-1", path="l1.md")
        assert result.ingestion.skipped is True
        assert "symlink loop" in result.ingestion.message


KEPT_EMPTY = "kept, not deleted: the root yields no source now where the index holds some (reindex with --allow-empty to delete)"


def test_an_emptied_folder_root_deletes_nothing_unless_allowed(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.md", "b.md"):
        (root / name).write_text(f"# {name}\n\nTEXT of {name}", encoding="utf-8")
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(root)
        root.rename(tmp_path / "docs-moved")
        root.mkdir()
        report = engine.reindex()
        assert report.complete is False and report.sources_deleted == 0 and report.chunks_deleted == 0
        assert [(s.path, s.reason) for s in report.skipped] == [("a.md", KEPT_EMPTY), ("b.md", KEPT_EMPTY)]
        assert sorted(s.source_id for s in engine.store.list_sources("default")) == ["a.md", "b.md"]
        again = engine.index(root)  # `plait index` of the same root is held to the same rule
        assert again.sources_deleted == 0 and len(again.skipped) == 2
    done = CliRunner().invoke(app, ["reindex", "--store", store, "--embedder", "fake", "--allow-empty", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["sourcesDeleted"] == 2
    with Plait(store, embedder=FakeEmbedder(dimension=16)) as engine:
        assert engine.store.list_sources("default") == []


def test_an_emptied_jsonl_corpus_deletes_nothing_unless_allowed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "first ALPHA-1"}\n{"_id": "d2", "text": "second"}\n', encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(corpus)
        corpus.write_text("", encoding="utf-8")
        report = engine.reindex()
        assert report.sources_deleted == 0 and report.complete is False
        assert [s.reason for s in report.skipped] == [KEPT_EMPTY, KEPT_EMPTY]
        assert len(engine.store.list_sources("default")) == 2
        assert engine.reindex(allow_empty=True).sources_deleted == 2


def _unlistable_folder(parent: Path) -> str:
    """A chain of folders whose full path exceeds PATH_MAX: listing the last one fails
    with ENAMETOOLONG even for root (file permissions would not stop root)."""
    names = ["d" * 250 for _ in range(18)]
    fd = os.open(parent, os.O_RDONLY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write("# Deep\n\nDEEP-1")
    finally:
        os.close(fd)
    return "/".join(names[:16])


def test_an_unreadable_folder_is_reported_and_blocks_deletions(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nGOOD-1", encoding="utf-8")
    (root / "old.md").write_text("# Old\n\nOLD-1", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index(root)
        (root / "old.md").unlink()
        _unlistable_folder(root)
        report = engine.reindex()
        reasons = [s.reason for s in report.skipped]
        assert any(r.startswith("unreadable folder: File name too long") for r in reasons), reasons
        unreadable = next(s.path for s in report.skipped if s.reason.startswith("unreadable folder"))
        assert unreadable.endswith("/") and unreadable.startswith("d" * 250 + "/")
        assert ("old.md", "kept, not deleted: part of the root could not be read (reindex with --allow-empty to delete)") in [
            (s.path, s.reason) for s in report.skipped
        ]
        assert report.sources_deleted == 0 and report.complete is False
        assert sorted(s.source_id for s in engine.store.list_sources("default")) == ["good.md", "old.md"]
        assert engine.reindex(allow_empty=True).sources_deleted == 1


def test_a_root_that_takes_sources_mid_run_wins_them_and_the_other_run_reports_conflicts(tmp_path: Path) -> None:
    """D14: run B commits between run A's ownership read and A's writes (what two
    concurrent `plait index` processes do); A must report the conflicts, not steal."""
    from plait.sources.base import Scan
    from plait.sources.roots import describe_root, open_root, root_key

    names = [f"page-{i:02d}.md" for i in range(30)]
    roots = {}
    for label in ("a", "b"):
        root = tmp_path / label
        root.mkdir()
        for name in names:
            (root / name).write_text(f"# {name}\n\nfrom {label.upper()}-ROOT", encoding="utf-8")
        roots[label] = describe_root(root, kind="folder")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        indexer, _ = engine._indexer("default")
        engine.store.ensure_collection("default")
        reports = {}

        def a_documents(scan: Scan):  # type: ignore[no-untyped-def]
            reports["b"] = indexer.index("default", open_root(roots["b"]).scan(), root=root_key(roots["b"]))
            yield from scan

        a_scan = open_root(roots["a"]).scan()
        racing = Scan(documents=a_documents(a_scan), skipped=a_scan.skipped)
        racing.seen = len(names)
        reports["a"] = indexer.index("default", racing, root=root_key(roots["a"]))

        assert reports["b"].complete is True and reports["b"].sources_indexed == 30
        assert reports["a"].complete is False and reports["a"].sources_indexed == 0
        assert sorted(s.path for s in reports["a"].skipped) == names
        assert {s.reason for s in reports["a"].skipped} == {
            f"already indexed from another root ({root_key(roots['b'])}); not overwritten"
        }
        owners = {s.source_id: s.root for s in engine.store.list_sources("default")}
        assert owners == {name: root_key(roots["b"]) for name in names}
        assert all("B-ROOT" in h.content for h in engine.search("ROOT", k=30).hits)
