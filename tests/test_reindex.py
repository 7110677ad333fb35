"""Reindex: idempotent, incremental (counted through the fake embedder), deletes what
vanished, backfills missing vectors; --scope, --source and --full narrow or rebuild."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from git_helpers import commit_all, git, make_repo, write
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError, ProviderUnavailableError, ValidationError
from plait.service import Plait
from plait.sources.folder import BINARY_REASON

FILES = {
    "README.md": "# Shop\n\nThe shop platform handbook.\n",
    "docs/adr/0001-keys.md": "# Idempotency keys\n\nEvery payment carries ERR-4012 keys.\n",
    "docs/adr/0002-events.md": "# Event sourcing\n\nOrders are event sourced.\n",
    "docs/refunds.md": "# Refunds\n\nRefund within 7 days.\n\n## Partial\n\nPartial refunds are allowed.\n",
}
# one chunk per file, except refunds.md: its two sections → 5 chunks in all
TOTAL = 5


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def _counts(report) -> tuple[int, int, int, int]:  # type: ignore[no-untyped-def]
    return report.chunks_added, report.chunks_updated, report.chunks_unchanged, report.chunks_deleted


def test_index_twice_and_reindex_twice_change_nothing(engine: Plait, fake: FakeEmbedder, repo: Path) -> None:
    first = engine.index(repo)
    assert _counts(first) == (TOTAL, 0, 0, 0) and first.embedding.calls == 1
    ids = engine.store.chunk_ids("default")
    assert len(ids) == len(set(ids)) == TOTAL
    embedded = fake.texts_embedded
    for report in (engine.index(repo), engine.reindex(), engine.reindex()):
        assert _counts(report) == (0, 0, TOTAL, 0)
        assert (report.sources_deleted, report.embedding.calls, report.embedding.embedded) == (0, 0, 0)
        assert report.complete is True
    assert engine.store.chunk_ids("default") == ids
    assert fake.texts_embedded == embedded
    info = engine.collections()[0]
    assert (info.chunks, info.sources) == (TOTAL, 4)
    assert len(engine.recorded_roots("default")) == 1  # indexing the same root again adds no root


def test_editing_one_file_re_embeds_only_its_changed_chunks(
    engine: Plait, fake: FakeEmbedder, repo: Path
) -> None:
    engine.index(repo)
    before = fake.texts_embedded
    edited = "# Refunds\n\nRefund within 30 days.\n\n## Partial\n\nPartial refunds are allowed.\n"
    write(repo, {"docs/refunds.md": edited})
    report = engine.reindex()
    # the first section changed, the second did not: one chunk updated, one call, one text
    assert _counts(report) == (0, 1, TOTAL - 1, 0)
    assert (report.embedding.calls, report.embedding.embedded) == (1, 1)
    assert fake.texts_embedded == before + 1
    hit = engine.search("30 days").hits[0]
    assert hit.origin.source_path == "docs/refunds.md" and "30 days" in hit.content


def test_deleted_file_loses_its_chunks(engine: Plait, repo: Path) -> None:
    engine.index(repo)
    gone = engine.store.chunk_ids("default", "docs/refunds.md")
    assert len(gone) == 2
    git(repo, "rm", "-q", "docs/refunds.md")
    commit_all(repo, "drop refunds")
    report = engine.reindex()
    assert _counts(report) == (0, 0, TOTAL - 2, 2) and report.sources_deleted == 1
    assert engine.store.chunk_ids("default", "docs/refunds.md") == []
    assert set(engine.store.get_chunks("default", gone)) == set()
    assert all(h.origin.source_path != "docs/refunds.md" for h in engine.search("refunds partial").hits)


def test_a_file_that_became_binary_loses_its_chunks(engine: Plait, repo: Path) -> None:
    engine.index(repo)
    write(repo, {"README.md": b"\x00\x01binary now"})
    report = engine.reindex()
    assert (report.chunks_deleted, report.sources_deleted) == (1, 1)
    assert [(s.path, s.reason) for s in report.skipped] == [
        ("README.md", "binary file (NUL byte in the first 8 KiB)")
    ]


@pytest.mark.parametrize("kind", ["git", "folder"])
def test_a_file_that_became_undecodable_keeps_its_last_good_chunks(
    engine: Plait, repo: Path, tmp_path: Path, kind: str
) -> None:
    """One stray Latin-1 byte appended to an indexed file: reindex skips it and says so,
    deletes nothing, and search still finds the version indexed before (it used to drop
    the file's chunks and report it as a vanished source)."""
    root = repo
    if kind == "folder":
        root = tmp_path / "plain"
        write(root, dict(FILES))
    engine.index(root)
    target = root / "docs/adr/0001-keys.md"
    target.write_bytes(target.read_bytes() + b"\nSee caf\xe9.\n")  # 57 bytes, then the 9th new one
    if kind == "git":
        commit_all(root, "a Latin-1 byte")
    report = engine.reindex()
    assert (report.sources_deleted, report.deleted_sources, report.chunks_deleted) == (0, [], 0)
    assert [(s.path, s.reason) for s in report.skipped] == [
        (
            "docs/adr/0001-keys.md",
            "not valid UTF-8 (byte 65); the version indexed before is kept (fix the file and reindex)",
        )
    ]
    assert report.complete is False
    assert engine.collections()[0].chunks == TOTAL
    adr = next(row for row in engine.coverage().scopes if row.scope == "adr")
    # present, indexed, outdated (the kept version is stale), vanished (it is not)
    assert (adr.sources_present, adr.sources_indexed, adr.sources_outdated, adr.sources_vanished) == (2, 2, 1, 0)
    (walked,) = engine.coverage().roots
    assert [s.reason for s in walked.skipped] == [report.skipped[0].reason]  # coverage says it is kept too
    hit = engine.search("ERR-4012").hits[0]
    assert hit.origin.source_path == "docs/adr/0001-keys.md"  # type: ignore[union-attr]
    target.write_text(FILES["docs/adr/0001-keys.md"] + "\nSee café.\n", encoding="utf-8")
    if kind == "git":
        commit_all(root, "fixed")
    fixed = engine.reindex()
    assert fixed.skipped == [] and fixed.complete is True and fixed.chunks_updated == 1


def test_vanished_session_loses_its_chunks(engine: Plait, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    events = [
        {"id": "a1", "sessionId": "A", "type": "chat.message", "payload": {"text": "alpha question"}},
        {"id": "a2", "sessionId": "A", "type": "agent.response", "payload": {"text": "alpha answer"}},
        {"id": "b1", "sessionId": "B", "type": "chat.message", "payload": {"text": "beta question"}},
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert engine.index_sessions(log).chunks_added == 3
    log.write_text("".join(json.dumps(e) + "\n" for e in events[:2]), encoding="utf-8")
    report = engine.reindex()
    assert _counts(report) == (0, 0, 2, 1) and report.sources_deleted == 1
    assert engine.store.chunk_ids("default", "B") == []


def test_missing_vectors_are_backfilled(engine: Plait, fake: FakeEmbedder, tmp_path: Path, repo: Path) -> None:
    engine.index(repo)
    db = sqlite3.connect(tmp_path / "plait.db")
    db.execute("UPDATE chunks SET vector = NULL WHERE source_id = 'README.md'")
    db.commit()
    db.close()
    before = fake.texts_embedded
    report = engine.reindex()
    assert (report.embedding.embedded, report.embedding.skipped, report.complete) == (1, 0, True)
    assert fake.texts_embedded == before + 1
    assert engine.store.chunks_without_vector("default") == []


def test_scope_narrows_the_run(engine: Plait, repo: Path) -> None:
    engine.index(repo)
    write(repo, {"README.md": "# Shop\n\nChanged readme.\n"})
    write(repo, {"docs/adr/0002-events.md": "# Event sourcing\n\nChanged.\n"})
    (repo / "docs/adr/0001-keys.md").unlink()
    report = engine.reindex(scope="adr")
    assert _counts(report) == (0, 1, 0, 1) and report.sources_deleted == 1
    readme = engine.store.get_chunks("default", engine.store.chunk_ids("default", "README.md"))
    assert [c.content for c in readme.values()] == ["# Shop\n\nThe shop platform handbook."]  # docs untouched
    assert _counts(engine.reindex(scope="docs")) == (0, 1, 2, 0)


@pytest.mark.parametrize("kind", ["git", "folder"])
def test_a_scoped_run_reports_and_counts_only_its_scope_s_skipped_files(
    engine: Plait, repo: Path, tmp_path: Path, kind: str
) -> None:
    """reindex --scope adr listed (and counted as seen) the docs files it skipped: 31/36
    sources for 31 ADRs of a repository with five unreadable docs files."""
    root = repo
    if kind == "folder":
        root = tmp_path / "plain"
        write(root, dict(FILES))
    engine.index(root)
    write(root, {"docs/logo.md": b"\x89PNG\x00\x01", "docs/adr/0003-diagram.md": b"\x89PNG\x00\x02"})
    target = root / "docs/refunds.md"
    target.write_bytes(target.read_bytes() + b"\ncaf\xe9\n")  # stored as docs: its old version is kept
    if kind == "git":
        commit_all(root, "two binary files and a Latin-1 byte")
    adr = engine.reindex(scope="adr")
    assert (adr.sources_seen, adr.sources_indexed) == (3, 2)
    assert [(s.path, s.reason) for s in adr.skipped] == [("docs/adr/0003-diagram.md", BINARY_REASON)]
    docs = engine.reindex(scope="docs")
    assert (docs.sources_seen, docs.sources_indexed) == (3, 1)  # README.md; refunds.md is kept
    assert sorted(s.path for s in docs.skipped) == ["docs/logo.md", "docs/refunds.md"]
    assert engine.reindex().sources_seen == 6  # no scope: all of them


def test_a_scope_the_collection_does_not_have_is_refused(engine: Plait, fake: FakeEmbedder, repo: Path) -> None:
    """``reindex --scope adrs`` (a typo) re-read nothing and reported "0/0 sources indexed …
    complete", exit 0, over HTTP a 200; it is refused with the scopes the collection has,
    before anything is read or embedded."""
    engine.index(repo)
    write(repo, {"README.md": "# Shop\n\nChanged readme.\n"})
    embedded = fake.texts_embedded
    with pytest.raises(ValidationError) as refused:
        engine.reindex(scope="adrs")
    assert str(refused.value) == (
        "collection 'default' has no scope 'adrs' (its scopes: adr, docs); "
        "a reindex without a scope picks up new sources of any scope"
    )
    assert fake.texts_embedded == embedded  # nothing read, nothing embedded
    readme = engine.store.get_chunks("default", engine.store.chunk_ids("default", "README.md"))
    assert [c.content for c in readme.values()] == ["# Shop\n\nThe shop platform handbook."]


def test_full_re_embeds_a_scope_in_place(engine: Plait, fake: FakeEmbedder, repo: Path) -> None:
    engine.index(repo)
    ids = engine.store.chunk_ids("default")
    before = fake.texts_embedded
    report = engine.reindex(scope="adr", full=True)
    # the two ADR chunks are embedded again and rewritten in place: nothing deleted first
    assert _counts(report) == (0, 0, 2, 0) and report.sources_deleted == 0
    assert (report.embedding.embedded, report.embedding.reused, report.embedding.calls) == (2, 0, 1)
    assert fake.texts_embedded == before + 2
    assert engine.store.chunk_ids("default") == ids


class RevisedEmbedder(FakeEmbedder):
    """The fake model after a provider-side revision: same name, every vector negated
    once ``revised`` is set; ``down`` makes every call fail like a closed port."""

    def __init__(self) -> None:
        super().__init__()
        self.revised = False
        self.down = False

    def _embed_batch(self, texts, kind):  # type: ignore[no-untyped-def]
        if self.down:
            raise ProviderUnavailableError("connection refused (test)")
        matrix = super()._embed_batch(texts, kind)
        return -matrix if self.revised else matrix


def _vectors(engine: Plait) -> dict[str, np.ndarray]:
    """Every stored chunk's vector, by chunk id (through the content hash)."""
    chunks = engine.store.get_chunks("default", engine.store.chunk_ids("default"))
    by_hash = engine.store.vectors_by_hash("default", [c.content_hash for c in chunks.values()])
    return {cid: by_hash[c.content_hash] for cid, c in chunks.items() if c.content_hash in by_hash}


def test_full_re_embeds_every_chunk_keeps_ids_and_drops_vanished_sources(tmp_path: Path, repo: Path) -> None:
    revised = RevisedEmbedder()
    with Plait(str(tmp_path / "full.db"), embedder=revised) as engine:
        engine.index(repo)
        old = _vectors(engine)
        assert len(old) == TOTAL
        ids = {s: engine.store.chunk_ids("default", s) for s in FILES}
        git(repo, "rm", "-q", "docs/adr/0002-events.md")
        commit_all(repo, "drop events")
        write(repo, {"docs/refunds.md": FILES["docs/refunds.md"].replace("7 days", "30 days")})
        revised.revised = True
        calls, texts = revised.passage_calls, revised.passages_embedded
        report = engine.reindex(full=True)
        # README, keys and refunds' second section unchanged (3), refunds' first edited (1),
        # events gone (1 chunk, 1 source); all 4 remaining texts embedded in one call
        assert _counts(report) == (0, 1, 3, 1) and report.sources_deleted == 1
        assert (report.embedding.embedded, report.embedding.reused, report.embedding.calls) == (4, 0, 1)
        assert (revised.passage_calls, revised.passages_embedded) == (calls + 1, texts + 4)
        assert report.complete is True
        assert engine.store.chunk_ids("default", "docs/adr/0002-events.md") == []
        for source in ("README.md", "docs/adr/0001-keys.md", "docs/refunds.md"):
            assert engine.store.chunk_ids("default", source) == ids[source]  # same ids
        new = _vectors(engine)
        assert sorted(new) == sorted(ids["README.md"] + ids["docs/adr/0001-keys.md"] + ids["docs/refunds.md"])
        unchanged = [*ids["README.md"], *ids["docs/adr/0001-keys.md"], ids["docs/refunds.md"][1]]
        for cid in unchanged:  # overwritten in place with the revised model's vector
            np.testing.assert_allclose(new[cid], -old[cid], atol=1e-6)
        # an incremental reindex afterwards embeds nothing and keeps the new vectors
        again = engine.reindex()
        assert _counts(again) == (0, 0, 4, 0) and again.embedding.calls == 0
        assert revised.passage_calls == calls + 1
        for cid in unchanged:
            np.testing.assert_allclose(_vectors(engine)[cid], -old[cid], atol=1e-6)


def test_full_with_the_provider_down_keeps_every_source_and_is_not_complete(tmp_path: Path, repo: Path) -> None:
    revised = RevisedEmbedder()
    with Plait(str(tmp_path / "down.db"), embedder=revised) as engine:
        engine.index(repo)
        old = _vectors(engine)
        revised.revised, revised.down = True, True
        report = engine.reindex(full=True)
        assert _counts(report) == (0, 0, TOTAL, 0) and report.sources_deleted == 0
        assert (report.embedding.available, report.embedding.embedded, report.complete) == (False, 0, False)
        assert "connection refused (test)" in (report.embedding.reason or "")
        kept = _vectors(engine)  # nothing was emptied: every chunk still has its old vector
        assert sorted(kept) == sorted(old)
        for cid, vector in kept.items():
            np.testing.assert_allclose(vector, old[cid], atol=1e-6)


def test_source_selects_one_root_and_roots_never_duplicate(
    engine: Plait, tmp_path: Path, repo: Path
) -> None:
    other = make_repo(tmp_path / "other", {"README.md": "# Other\n\nanother readme\n", "x.md": "# X\n\nx\n"})
    engine.index(repo)
    report = engine.index(other)
    # README.md already belongs to the first root: skipped, never duplicated or stolen
    assert [(s.path, s.reason) for s in report.skipped] == [
        ("README.md", f"already indexed from another root (git:{repo.resolve()}); not overwritten")
    ]
    assert report.chunks_added == 1
    (other / "x.md").unlink()
    write(repo, {"README.md": "# Shop\n\nChanged.\n"})
    only_other = engine.reindex(source=other)
    assert _counts(only_other) == (0, 0, 0, 1)
    assert _counts(engine.reindex(source=repo)) == (0, 1, TOTAL - 1, 0)
    with pytest.raises(NotFoundError, match="is not a recorded source") as outside:
        engine.reindex(source=tmp_path)
    assert "inside" not in str(outside.value)
    # a folder or file under a root: the error names that root (it said only 'not a recorded source')
    with pytest.raises(NotFoundError) as inside:
        engine.reindex(source=repo / "docs" / "adr")
    assert str(inside.value).endswith(
        f"; it is inside {repo.resolve()}: --source takes a recorded root, and reindexing it re-reads only what changed"
    )


def test_cli_reindex_flags(tmp_path: Path, repo: Path) -> None:
    store = str(tmp_path / "cli.db")
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(repo), "--store", store, "--embedder", "fake"]).exit_code == 0
    result = runner.invoke(app, ["reindex", "--store", store, "--scope", "adr", "--full", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["chunksAdded"], data["chunksDeleted"], data["chunksUnchanged"]) == (0, 0, 2)
    assert (data["embedding"]["calls"], data["embedding"]["embedded"]) == (1, 2)
    result = runner.invoke(app, ["reindex", "--store", store, "--source", str(tmp_path), "--json"])
    assert result.exit_code == 1 and "is not a recorded source" in " ".join(result.stderr.split())
    result = runner.invoke(app, ["reindex", "--store", store, "--scope", "adrs"])
    assert (result.exit_code, result.stderr) == (1, (
        "error: collection 'default' has no scope 'adrs' (its scopes: adr, docs); "
        "a reindex without a scope picks up new sources of any scope\n"))
