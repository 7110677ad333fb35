"""ADR layouts by convention (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.service import Plait
from plait.sources.conventions import convention_scope, looks_like_adr

runner = CliRunner()
ADR_TEXT = "# 7. Use queues\n\n## Status\n\nAccepted\n\n## Context\n\nLoad.\n\n## Decision\n\nQueues.\n"
MADR_TEXT = "---\nstatus: accepted\n---\n# Use queues\n\n## Decision Outcome\n\nChosen: queues.\n"


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("docs/adr/0001-x.md", "docs/adr"),
        ("doc/adr/notes.md", "doc/adr"),
        ("docs/architecture/decisions/0033-ip-ranges.md", "docs/architecture/decisions"),
        ("documentation/adr/a.md", "documentation/adr"),
        ("architecture-decision-records/a.md", "architecture-decision-records"),
        ("adr/0002-y.md", "adr"),
        ("decisions/0003-z.md", "decisions"),
        ("services/billing/docs/adr/0001-x.md", "services/billing/docs/adr"),
    ],
)
def test_adr_folders(path: str, folder: str) -> None:
    assert convention_scope(path, "plain text") == ("adr", folder)


def test_adr_shaped_files_anywhere_and_lookalikes_not() -> None:
    assert looks_like_adr("notes/0012-use-queues.md", ADR_TEXT)
    assert looks_like_adr("rfc/0004-queues.md", MADR_TEXT)
    assert convention_scope("notes/0012-use-queues.md", ADR_TEXT) == ("adr", "notes")
    # Numbered but no Decision section; a Decision section but no number; not Markdown.
    assert not looks_like_adr("notes/0012-release.md", "# Release\n\n## Status\n\nShipped\n")
    assert not looks_like_adr("notes/use-queues.md", ADR_TEXT)
    assert not looks_like_adr("notes/0012-use-queues.txt", ADR_TEXT)
    assert convention_scope("docs/adrs-are-fun.md", "x") == ("docs", None)
    assert convention_scope("mydecisions/a.md", "x") == ("docs", None)


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    decisions = root / "docs" / "architecture" / "decisions"
    decisions.mkdir(parents=True)
    for n in (1, 2, 3):
        (decisions / f"000{n}-d{n}.md").write_text(f"# {n}. D{n}\n\nqueues {n}\n", encoding="utf-8")
    (root / "notes").mkdir()
    (root / "notes" / "0012-use-queues.md").write_text(ADR_TEXT, encoding="utf-8")
    (root / "README.md").write_text("# Repo\n\nqueues everywhere\n", encoding="utf-8")
    return root


def test_index_report_says_what_it_found(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "plait.db"), embedder="none") as engine:
        report = engine.index(_repo(tmp_path))
        assert report.adr_folders == {"docs/architecture/decisions": 3, "notes": 1}
        scopes = {s.scope: s.chunks for s in engine.store.scopes("default")}
        assert set(scopes) == {"adr", "docs"} and scopes["docs"] == 1
    result = runner.invoke(app, ["index", str(_repo(tmp_path / "b")), "--store", str(tmp_path / "b.db"), "--embedder", "none"])
    assert result.exit_code == 0, result.output
    assert "3 ADRs under docs/architecture/decisions → adr" in result.output
    assert "1 ADR under notes → adr" in result.output


def test_scope_rule_still_overrides(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    result = runner.invoke(
        app, ["index", str(_repo(tmp_path)), "--store", store, "--embedder", "none", "--json", "--scope-rule", "=misc"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["adrFolders"] == {}
    with Plait(store, embedder="none") as engine:
        assert {s.scope for s in engine.store.scopes("default")} == {"misc"}


def test_a_search_in_an_empty_scope_says_so(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "guide.md").write_text("# Guide\n\nqueues\n", encoding="utf-8")
    store = str(tmp_path / "p.db")
    assert runner.invoke(app, ["index", str(root), "--store", store, "--embedder", "none"]).exit_code == 0
    result = runner.invoke(app, ["search", "queues", "--store", store, "--embedder", "none", "--scope", "adr"])
    assert result.exit_code == 0, result.output
    assert "no hits" in result.output
    flat = " ".join(result.output.split())  # rich wraps long lines
    assert "note: scope 'adr' has no chunks in collection 'default' (chunks per scope: docs 1)" in flat
    with Plait(store, embedder="none") as engine:
        assert engine.search("queues", scopes=["docs"]).notes == []
