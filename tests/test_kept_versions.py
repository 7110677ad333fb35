"""What explain says of a file whose older version the index keeps: an index run that
cannot read a file it indexed before (a byte that is not UTF-8) keeps its chunks, and
explain — library and CLI — says that the version searched is that older one, when it
was indexed, which run could not read the current file and why (plait.kept_versions).
Real SQLite store, real files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from plait.cli import app
from plait.collection_settings import read_settings, write_settings
from plait.kept_versions import KeptVersion, kept_versions
from plait.service import Plait

BETA = "# Beta\n\nBeta covers gizmos and sprockets.\n"  # 7 + 1 + 34 = 42 bytes
FILES = {
    "a.md": "# Alpha\n\nThe alpha guide talks about widgets.\n",
    "b.md": BETA,
    "c.md": "# Gamma\n\nGamma is about doohickeys.\n",
}


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _line(output: str, label: str) -> str:
    (line,) = [line for line in output.splitlines() if line.startswith(label)]
    return line


def test_explain_says_the_index_holds_the_older_version_of_an_unreadable_file(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    store = str(tmp_path / "plait.db")
    runner = CliRunner()
    with Plait(store, embedder="fake") as engine:
        engine.index(root)
        indexed_at = {s.source_id: s.indexed_at for s in engine.store.list_sources("default")}["b.md"]
        (root / "b.md").write_bytes(BETA.encode() + b"\xff broken\n")  # byte 42 is not UTF-8
        before = _now()
        report = engine.index(root)
        after = _now()
        assert [(s.path, s.reason) for s in report.skipped] == [
            ("b.md", "not valid UTF-8 (byte 42); the version indexed before is kept (fix the file and reindex)")
        ]
        assert report.deleted_sources == [] and engine.store.chunk_ids("default", "b.md") != []
        stored = read_settings(engine.store, "default").kept_versions
        skipped_at = stored["b.md"]["skippedAt"]
        assert before <= skipped_at <= after
        assert stored == {
            "b.md": {
                "root": f"folder:{root}",
                "reason": "not valid UTF-8 (byte 42)",
                "skippedAt": skipped_at,
                "indexedAt": indexed_at,
            }
        }
        result = engine.explain("gizmos", path="b.md")
    kept = (
        f"the index holds the version of b.md indexed {indexed_at}: the index run of {skipped_at} could not "
        "read the current file (not valid UTF-8 (byte 42)) and kept that version — fix the file and reindex"
    )
    assert result.ingestion.indexed is True
    assert result.ingestion.kept_versions == {
        "b.md": KeptVersion(
            root=f"folder:{root}", reason="not valid UTF-8 (byte 42)", skipped_at=skipped_at, indexed_at=indexed_at
        )
    }
    assert result.ingestion.message == f"1 chunk indexed, 1 with a vector; {kept}"
    suffix = (
        f" — ingestion: what is searched is the version of b.md indexed {indexed_at} (the current file "
        "could not be read: not valid UTF-8 (byte 42); fix it and reindex)"
    )
    assert result.diagnosis.message.endswith(suffix)

    shown = runner.invoke(app, ["explain", "gizmos", "--path", "b.md", "--store", store], env={"COLUMNS": "600"})
    assert shown.exit_code == 0, shown.output
    assert _line(shown.stdout, "ingestion") == f"ingestion  1 chunk indexed, 1 with a vector; {kept}"
    assert _line(shown.stdout, "diagnosis").endswith(suffix)

    # fixed and reindexed: the index holds the current file, and explain says nothing more
    (root / "b.md").write_text(BETA + "Now with cogs.\n", encoding="utf-8")
    with Plait(store, embedder="fake") as engine:
        fixed = engine.reindex()
        assert fixed.changed_sources == ["b.md"] and fixed.skipped == [] and fixed.complete
        assert read_settings(engine.store, "default").kept_versions == {}
        again = engine.explain("gizmos", path="b.md")
    assert again.ingestion.kept_versions == {}
    assert again.ingestion.message == "1 chunk indexed, 1 with a vector"
    assert " — ingestion:" not in again.diagnosis.message


def test_a_record_is_not_believed_once_the_source_was_written_again(tmp_path: Path) -> None:
    """A record whose indexedAt is not the stored source's (the source was written since by
    other means) says nothing; neither does one that is not a record (edited by hand)."""
    root = _folder(tmp_path)
    with Plait(str(tmp_path / "plait.db"), embedder="fake") as engine:
        engine.index(root)
        record = {"root": f"folder:{root}", "reason": "not valid UTF-8 (byte 3)", "skippedAt": "2026-01-02T00:00:00+00:00"}
        write_settings(
            engine.store,
            "default",
            kept_versions={
                "a.md": {**record, "indexedAt": "2000-01-01T00:00:00+00:00"},
                "c.md": {"reason": 7},
            },
        )
        assert kept_versions(engine.store, "default", ["a.md", "b.md", "c.md"]) == {}
        result = engine.explain("widgets", path="a.md")
    assert result.ingestion.kept_versions == {}
    assert result.ingestion.message == "1 chunk indexed, 1 with a vector"
