"""Coverage: per-scope figures backed by the sources and the store, null when unknowable."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from git_helpers import git, make_repo, write
from plait.cli import app
from plait.coverage import ScopeCoverage
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin, to_json

SUPPORT = Path(__file__).resolve().parents[1] / "examples" / "sessions" / "support-2026-10.jsonl"
FILES = {
    "README.md": "# Shop\n\nThe shop platform handbook.\n",
    "docs/adr/0001-keys.md": "# Idempotency keys\n\nEvery payment carries keys.\n",
    "docs/adr/0002-events.md": "# Event sourcing\n\nOrders are event sourced.\n",
    "docs/refunds.md": "# Refunds\n\nRefund within 7 days.\n\n## Partial\n\nPartial refunds are allowed.\n",
    "logo.md": b"\x89PNG\x00\x00",
}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Plait, Path, Path]]:
    repo = make_repo(tmp_path / "repo", FILES)
    log = tmp_path / "logs" / "support.jsonl"
    log.parent.mkdir()
    shutil.copy(SUPPORT, log)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index(repo)
        engine.index_sessions(log)
        yield engine, repo, log


def _row(engine: Plait, scope: str) -> tuple[object, ...]:
    row = next(s for s in engine.coverage().scopes if s.scope == scope)
    return (row.sources_present, row.sources_indexed, row.sources_outdated, row.sources_vanished,
            row.sources_stored, row.chunks, row.chunks_without_vector)  # fmt: skip


def test_fresh_index_is_fully_covered(setup: tuple[Plait, Path, Path]) -> None:
    engine, repo, _log = setup
    report = engine.coverage()
    stored = {s.scope: s.last_indexed_at for s in engine.store.scopes("default")}
    assert [s.scope for s in report.scopes] == ["adr", "docs", "sessions"]
    assert report.scopes[0] == ScopeCoverage(
        scope="adr", sources_present=2, sources_indexed=2, sources_outdated=0, sources_vanished=0,
        sources_stored=2, chunks=2, chunks_without_vector=0, embedding_model="fake/hash-64",
        last_indexed_at=stored["adr"],
    )  # fmt: skip
    assert stored["adr"] is not None
    assert _row(engine, "docs") == (2, 2, 0, 0, 2, 3, 0)
    assert _row(engine, "sessions") == (2, 2, 0, 0, 2, 12, 0)
    git_root, session_root = report.roots
    assert (git_root.kind, git_root.path, git_root.available, git_root.sources_present) == (
        "git", str(repo.resolve()), True, 4
    )
    assert [(s.path, s.reason) for s in git_root.skipped] == [
        ("logo.md", "binary file (NUL byte in the first 8 KiB)")
    ]
    assert session_root.skipped_by_type == {"agent.status": 4, "tool.call": 5, "tool.result": 4, "agent.error": 1}
    assert (report.embedder_model, report.dimension, report.sources_without_root) == ("hash-64", 64, 0)


def test_changes_since_the_last_index_show_until_reindex(setup: tuple[Plait, Path, Path]) -> None:
    engine, repo, _ = setup
    ids = engine.store.chunk_ids("default")
    write(repo, {"docs/refunds.md": "# Refunds\n\nRefund within 30 days.\n", "docs/new.md": "# New\n\nnew\n"})
    git(repo, "add", "docs/new.md")  # tracked (staged), never indexed
    (repo / "README.md").unlink()
    # docs: present refunds + new; indexed refunds; outdated refunds; vanished README
    assert _row(engine, "docs") == (2, 1, 1, 1, 2, 3, 0)
    assert _row(engine, "adr") == (2, 2, 0, 0, 2, 2, 0)
    assert engine.store.chunk_ids("default") == ids  # coverage wrote nothing
    engine.reindex()
    assert _row(engine, "docs") == (2, 2, 0, 0, 2, 2, 0)


def test_chunks_without_a_vector_are_counted(setup: tuple[Plait, Path, Path], tmp_path: Path) -> None:
    engine, _, _ = setup
    db = sqlite3.connect(tmp_path / "p.db")
    db.execute("UPDATE chunks SET vector = NULL WHERE source_id = 'docs/refunds.md'")
    db.commit()
    db.close()
    assert _row(engine, "docs") == (2, 2, 0, 0, 2, 3, 2)


def test_unreadable_roots_give_null_not_guesses(setup: tuple[Plait, Path, Path]) -> None:
    engine, repo, log = setup
    log.rename(log.with_suffix(".moved"))
    report = engine.coverage()
    sessions = next(s for s in report.scopes if s.scope == "sessions")
    assert (sessions.sources_present, sessions.sources_indexed, sessions.sources_vanished) == (None, None, None)
    assert (sessions.sources_stored, sessions.chunks) == (2, 12)
    assert report.roots[1].available is False and str(log) in (report.roots[1].reason or "")
    assert _row(engine, "adr") == (2, 2, 0, 0, 2, 2, 0)  # a session log cannot feed adr
    shutil.rmtree(repo)
    # a repository's scope rules may feed any scope: nothing present can be backed now
    assert all(s.sources_present is None for s in engine.coverage().scopes)


def test_sources_indexed_from_code_make_their_scope_unknown(setup: tuple[Plait, Path, Path]) -> None:
    engine, _, _ = setup
    part = SourcePart(text="from code", origin=FileOrigin(source_path="kb-1"))
    engine.index_documents([SourceDocument(source_id="kb-1", scope="docs", parts=(part,))])
    report = engine.coverage()
    assert report.sources_without_root == 1
    assert _row(engine, "docs") == (None, None, None, None, 3, 4, 0)
    assert _row(engine, "adr") == (2, 2, 0, 0, 2, 2, 0)


def test_cli_coverage_json_is_the_api_model(setup: tuple[Plait, Path, Path], tmp_path: Path) -> None:
    engine, _, _ = setup
    result = CliRunner().invoke(app, ["coverage", "--store", str(tmp_path / "p.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == to_json(engine.coverage())
    assert json.loads(result.stdout)["scopes"][0]["sourcesPresent"] == 2
    table = CliRunner().invoke(app, ["coverage", "--store", str(tmp_path / "p.db")])
    assert table.exit_code == 0 and "logo.md" in table.stdout
    with pytest.raises(NotFoundError):
        engine.coverage(collection="missing")


# ------------------------------------------------------------------------- FAQ cards
def _figures(engine: Plait, scope: str) -> tuple[int | None, ...]:
    row = next(s for s in engine.coverage(collection="kb").scopes if s.scope == scope)
    return (row.sources_present, row.sources_indexed, row.sources_outdated, row.sources_vanished, row.sources_stored)


def test_faq_card_scope_is_compared_with_the_refinery_cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.refinery import CARD_SCOPE
    from plait.refinery.cards import card_document, card_source_id

    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "docs"
    folder.mkdir()
    faq = Path(__file__).resolve().parents[1] / "examples" / "docs" / "faq.md"
    (folder / "faq.md").write_text(faq.read_text(encoding="utf-8"), encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64), llm="none") as engine:
        engine.index(folder, collection="kb")
        assert all(s.scope != CARD_SCOPE for s in engine.coverage(collection="kb").scopes)  # no cards, no scope
        assert not (tmp_path / "refinery.db").exists()  # coverage did not open a refinery to find that out
        engine.refinery.run("kb", mode="extractive")
        cards = engine.refinery.cards("kb")
        assert len(cards) == 16
        # present, indexed, outdated, vanished, stored
        assert _figures(engine, CARD_SCOPE) == (16, 16, 0, 0, 16)
        assert engine.coverage(collection="kb").sources_without_root == 0

        rejected = engine.refinery.reject("kb", cards[0].id)  # leaves the index and the count
        assert _figures(engine, CARD_SCOPE) == (15, 15, 0, 0, 15)
        engine.index_documents([card_document(rejected)], collection="kb")  # a stale card left in the index
        assert _figures(engine, CARD_SCOPE) == (15, 15, 0, 1, 16)
        engine.store.delete_source("kb", card_source_id(rejected.id))

        edited = cards[1].model_copy(update={"question": "An older wording of the question?"})
        engine.index_documents([card_document(edited)], collection="kb")  # index differs from the card now
        assert _figures(engine, CARD_SCOPE) == (15, 15, 1, 0, 15)
        engine.store.delete_source("kb", card_source_id(cards[2].id))  # a card missing from the index
        assert _figures(engine, CARD_SCOPE) == (15, 14, 1, 0, 14)
