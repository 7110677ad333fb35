"""Index reports that add up and name the sources they touched (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait

runner = CliRunner()
TEXT = "# Same\n\n## One\n\nfirst part\n\n## Two\n\nsecond part\n"  # two chunks


def test_counts_add_up_on_a_fresh_store_and_changes_are_named(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.md", "b.md"):  # equal texts: their chunks share a content hash
        (root / name).write_text(TEXT, encoding="utf-8")
    (root / "c.md").write_text("# Other\n\nthird text\n", encoding="utf-8")
    fake = FakeEmbedder(dimension=16)
    with Plait(str(tmp_path / "p.db"), embedder=fake) as engine:
        first = engine.index(root)
        total = first.chunks_added
        assert total == 5
        emb = first.embedding
        # 3 distinct texts embedded, the 2 chunks of b.md equal to a.md's: deduplicated.
        assert (emb.embedded, emb.reused, emb.deduplicated) == (3, 0, 2)
        assert emb.embedded + emb.reused + emb.deduplicated == total
        assert first.added_sources == ["a.md", "b.md", "c.md"] and first.changed_sources == []
        (root / "b.md").write_text(TEXT.replace("second", "2nd"), encoding="utf-8")
        (root / "c.md").unlink()
        (root / "d.md").write_text("# New\n\nfresh\n", encoding="utf-8")
        again = engine.reindex()
    assert again.added_sources == ["d.md"]
    assert again.changed_sources == ["b.md"]
    assert again.deleted_sources == ["c.md"]


def test_text_report_lists_the_first_twenty(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for n in range(25):
        (root / f"f{n:02d}.md").write_text(f"# F{n}\n\nbody {n}\n", encoding="utf-8")
    store = str(tmp_path / "p.db")
    text = runner.invoke(app, ["index", str(root), "--store", store, "--embedder", "none"])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.output.split())
    assert "added (25): f00.md, f01.md" in flat and "f19.md … and 5 more (all in --json)" in flat
    assert "f20.md" not in flat
    (root / "f24.md").write_text("# F24\n\nchanged\n", encoding="utf-8")
    data = json.loads(runner.invoke(app, ["reindex", "--store", store, "--embedder", "none", "--json"]).stdout)
    assert data["changedSources"] == ["f24.md"] and data["addedSources"] == []
