"""The folder source's file decoding and what a walk marks as present but unreadable."""

from __future__ import annotations

import codecs
from pathlib import Path

from plait.sources.folder import BINARY_REASON, FolderSource, decode_text


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
