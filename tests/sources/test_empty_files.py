"""A file with no text (empty, or only whitespace) yields no chunk: it is skipped with its
reason in the index report, coverage and explain, never counted as indexed; a file that
is emptied loses the chunks of its old text. It was counted in ``sourcesIndexed`` while
coverage showed it present and not indexed, and explain advised a reindex that could
never index it."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_helpers import commit_all, make_repo, write
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.folder import EMPTY_REASON, FolderSource, decode_text

FILES: dict[str, str | bytes] = {
    "guide.md": "# Guide\n\nRefunds take ERR-4012 keys.\n",
    "notes.md": "# Notes\n\nKeep NOTE-77 handy.\n",
    "empty.md": "",
    "blank.md": "  \n\n\t\n",
}


def test_decode_text_refuses_a_file_with_no_text() -> None:
    assert decode_text(b"") == (None, EMPTY_REASON)
    assert decode_text(b" \r\n\t\n") == (None, EMPTY_REASON)
    assert decode_text(b"\xef\xbb\xbf\n") == (None, EMPTY_REASON)  # a UTF-8 BOM and a newline
    assert decode_text("\n".encode("utf-16")) == (None, EMPTY_REASON)
    assert decode_text(b" x ") == (" x ", None)


def test_a_folder_walk_skips_empty_files_and_does_not_mark_them_unread(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root, FILES)
    scan = FolderSource(root=root).scan()
    assert sorted(doc.source_id for doc in scan) == ["guide.md", "notes.md"]
    assert sorted((s.path, s.reason) for s in scan.skipped) == [("blank.md", EMPTY_REASON), ("empty.md", EMPTY_REASON)]
    assert scan.unread == set()  # its text is gone for good: an emptied file's chunks go


@pytest.mark.parametrize("kind", ["folder", "git"])
def test_empty_files_are_skipped_and_an_emptied_file_loses_its_chunks(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "docs"
    if kind == "git":
        make_repo(root, FILES)
    else:
        write(root, FILES)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        assert (report.sources_seen, report.sources_indexed, report.chunks_added) == (4, 2, 2)
        assert sorted((s.path, s.reason) for s in report.skipped) == [
            ("blank.md", EMPTY_REASON),
            ("empty.md", EMPTY_REASON),
        ]
        (scope,) = engine.coverage().scopes
        assert (scope.sources_present, scope.sources_indexed, scope.sources_stored) == (2, 2, 2)
        why = engine.explain("anything", path="empty.md")
        assert why.ingestion.skipped is True and why.diagnosis.code == "skipped"
        assert why.ingestion.message.endswith(f"empty.md was skipped when indexing {kind}:{root}: {EMPTY_REASON}")

        write(root, {"notes.md": "\n"})  # the user emptied it
        if kind == "git":
            commit_all(root, "empty notes")
        again = engine.reindex()
        assert (again.sources_indexed, again.sources_deleted, again.chunks_deleted) == (1, 1, 1)
        assert again.deleted_sources == ["notes.md"]
        assert ("notes.md", EMPTY_REASON) in [(s.path, s.reason) for s in again.skipped]
        assert engine.search("NOTE-77", mode="lexical").hits == []
        assert [s.source_id for s in engine.store.list_sources("default")] == ["guide.md"]
