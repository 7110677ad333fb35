"""The folder source's file decoding and what a walk marks as present but unreadable."""

from __future__ import annotations

import codecs
from pathlib import Path

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.sources.folder import BINARY_REASON, FolderSource, decode_text
from plait.types import FileOrigin


def test_decode_text_reads_utf8_and_utf16_with_their_byte_order_marks() -> None:
    assert decode_text("café".encode()) == ("café", None)
    assert decode_text(codecs.BOM_UTF8 + "café".encode()) == ("café", None)
    # UTF-16 is full of NUL bytes; with its BOM it is text, not "binary" (it was skipped as such)
    assert decode_text("# Título\n".encode("utf-16")) == ("# Título\n", None)
    assert decode_text(codecs.BOM_UTF16_BE + "ok".encode("utf-16-be")) == ("ok", None)
    assert decode_text(codecs.BOM_UTF16_LE + b"o\x00k") == (None, "not valid UTF-16 (byte 4)")  # a lone last byte
    assert decode_text(b"PNG\x00\x01") == (None, BINARY_REASON)
    assert decode_text(b"caf\xe9") == (None, "not valid UTF-8 (byte 3)")


def test_a_walk_marks_unreadable_files_that_are_still_there(tmp_path: Path) -> None:
    """``Scan.unread``: an undecodable or too large file is still there (its old version
    may stay indexed); a binary file and a dangling link are not."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nfine\n", encoding="utf-8")
    (root / "latin1.md").write_bytes(b"# Caf\xe9\n")
    (root / "big.md").write_text("x" * 200, encoding="utf-8")
    (root / "logo.md").write_bytes(b"\x89PNG\x00\x00")
    (root / "gone.md").symlink_to(root / "nowhere.md")
    (root / "utf16.md").write_bytes("# Olá\n\nmundo\n".encode("utf-16"))
    scan = FolderSource(root=root, max_bytes=100).scan()
    assert sorted(doc.source_id for doc in scan) == ["good.md", "utf16.md"]
    assert sorted((s.path, s.reason) for s in scan.skipped) == [
        ("big.md", "larger than the limit (200 bytes > 100)"),
        ("gone.md", "not a regular file"),
        ("latin1.md", "not valid UTF-8 (byte 5)"),
        ("logo.md", BINARY_REASON),
    ]
    assert scan.unread == {"big.md", "latin1.md"}


def test_a_lone_carriage_return_ends_a_line() -> None:
    assert decode_text(b"# A\r\rtext\r") == ("# A\n\ntext\n", None)  # classic Mac line endings
    assert decode_text(b"# A\r\n\r\ntext\r\n") == ("# A\r\n\r\ntext\r\n", None)  # CRLF kept
    assert decode_text(b"a\r\r\nb\rc\n") == ("a\n\r\nb\nc\n", None)  # CR, CRLF; a stray CR


def test_a_file_with_classic_mac_line_endings_keeps_its_headings(tmp_path: Path) -> None:
    # it was one line: one section titled with the whole file ("Old Mac This file … macending."),
    # that title indexed with every chunk
    root = tmp_path / "docs"
    root.mkdir()
    (root / "mac.md").write_bytes(b"# Old Mac\r\rThis file uses CR-ONLY-1 endings.\r\r## Second\r\rMore text MAC-2.\r")
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        assert (report.sources_indexed, report.chunks_added) == (1, 2)
        (hit,) = engine.search("MAC-2", mode="lexical").hits
    assert isinstance(hit.origin, FileOrigin)
    assert (hit.origin.title, hit.origin.heading_path) == ("Old Mac", ["Old Mac", "Second"])
    assert hit.content == "## Second\n\nMore text MAC-2."
