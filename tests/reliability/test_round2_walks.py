"""Issue 23 D12: readers do not trigger a full rescan per request. Coverage and explain of
an unindexed path reuse one walk per root while the collection is unchanged (bounded by
a maximum age); any write, or the age, makes the next reader walk again."""

from __future__ import annotations

from pathlib import Path

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait


def _present(engine: Plait) -> int | None:
    return engine.coverage().scopes[0].sources_present


def test_readers_reuse_the_walk_until_the_collection_changes(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nALPHA-1", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), walk_max_age=3600) as engine:
        engine.index(root)
        assert _present(engine) == 1
        walks = engine.walks.walks
        (root / "b.md").write_text("# B\n\nBETA-1", encoding="utf-8")  # on disk, not indexed yet
        assert _present(engine) == 1  # the cached walk: no rescan for a reader
        missing = engine.explain("BETA-1", path="b.md")
        assert "the index holds no chunk of it" in missing.ingestion.message  # explain used the same walk
        assert engine.walks.walks == walks
        engine.reindex()  # a write: the collection's state changed
        assert _present(engine) == 2
        assert engine.walks.walks == walks + 1
        assert engine.explain("BETA-1", path="b.md").ingestion.indexed is True


def test_a_walk_older_than_the_maximum_age_is_taken_again(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nALPHA-1", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), walk_max_age=0) as engine:
        engine.index(root)
        assert _present(engine) == 1
        (root / "b.md").write_text("# B\n\nBETA-1", encoding="utf-8")
        assert _present(engine) == 2  # max age 0: every reader walks (the old behaviour)
        explained = engine.explain("BETA-1", path="b.md")
        assert "yields 'b.md' now but the index holds no chunks for it" in explained.ingestion.message
