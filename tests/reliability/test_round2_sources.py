"""Issue 23, sources: a symlink loop is a skip with a reason (D2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_helpers import commit_all, make_repo

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
