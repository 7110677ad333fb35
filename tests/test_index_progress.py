"""Indexing progress: a known number of sources gives the bar a total (and so an ETA)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from git_helpers import commit_all, make_repo
from plait.cli.progress import IndexProgress
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.sources.folder import FolderSource
from plait.sources.git import GitSource
from plait.types import FileOrigin

FILES: dict[str, str | bytes] = {
    "a.md": "# A\n\nalpha text\n",
    "b.md": "# B\n\nbeta text\n",
    "sub/c.md": "# C\n\ngamma text\n",
    "bin.md": b"\x00\x01\x02 not text \xff\xfe",
    "notes.png": b"\x89PNG",
}


def _write(root: Path) -> Path:
    for name, body in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body, encoding="utf-8")
    return root


def test_folder_scan_knows_its_total_once_read(tmp_path: Path) -> None:
    scan = FolderSource(root=_write(tmp_path)).scan()
    assert scan.total is None  # nothing walked yet
    docs = [d.source_id for d in scan]
    # four .md files match the globs (the png does not); the binary one is skipped
    assert (scan.total, scan.seen, sorted(docs)) == (4, 4, ["a.md", "b.md", "sub/c.md"])
    assert [s.path for s in scan.skipped] == ["bin.md"]


def test_git_scan_knows_its_total(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    head = commit_all(repo, "second")
    working = GitSource(root=repo).scan()
    assert working.total == 4  # tracked files matching the globs, known before reading
    list(working)
    at_commit = GitSource(root=repo, ref=head).scan()
    list(at_commit)
    assert (at_commit.total, at_commit.seen) == (4, 4)


def test_index_ticks_count_every_source_read_against_the_total(tmp_path: Path) -> None:
    ticks: list[tuple[int, int, int | None]] = []
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index(_write(tmp_path / "docs"), progress=lambda *t: ticks.append(t))
    assert ticks[-1] == (4, 3, 4)  # 4 sources read (bin.md skipped), 3 chunks, 4 in all
    assert all(total == 4 and done <= 4 for done, _, total in ticks)
    assert [done for done, _, _ in ticks] == sorted(done for done, _, _ in ticks)


def test_a_stream_of_documents_has_no_total(tmp_path: Path) -> None:
    ticks: list[tuple[int, int, int | None]] = []
    docs = [
        SourceDocument(
            source_id=f"d{i}.md",
            scope="docs",
            parts=(SourcePart(text=f"doc {i} words", origin=FileOrigin(source_path=f"d{i}.md")),),
        )
        for i in range(3)
    ]
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index_documents(docs, progress=lambda *t: ticks.append(t))
    assert ticks == [(1, 1, None), (2, 2, None), (3, 3, None)]


def test_bar_shows_n_of_m_when_the_total_is_known() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    bars = IndexProgress(console, bars=True, quiet=False)
    bars.documents(2, 7, 4)
    assert bars._docs is not None
    bars._docs.refresh()
    bars.close()
    assert "2/4 sources · 7 chunks · ETA" in out.getvalue()


def test_bar_without_a_total_counts_sources() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    bars = IndexProgress(console, bars=True, quiet=False)
    bars.documents(2, 7, None)
    assert bars._docs is not None
    bars._docs.refresh()
    bars.close()
    text = out.getvalue()
    assert "2 sources · 7 chunks" in text and "/" not in text.split("sources")[0]
