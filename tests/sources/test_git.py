"""The git source: tracked files only, scopes by prefix, bad files skipped with reasons,
commits indexed by ref without a checkout. Every repository is real (the git CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from git_helpers import commit_all, git, make_repo, write
from plait.cli import app
from plait.embeddings.fake import FakeEmbedder
from plait.errors import SourceError
from plait.service import Plait
from plait.sources.git import GitSource
from plait.types import FileOrigin

MB = 1024 * 1024

DOCS = {
    "README.md": "# Shop\n\nThe shop platform.\n",
    "docs/adr/0001-idempotency.md": "# ADR 0001: idempotency keys\n\nUse ERR-4012 keys.\n",
    "docs/guide.md": "# Guide\n\nHow to refund.\n",
    "notes.txt": "plain notes\n",
    "src/app.py": "print('not a doc')\n",
}


def _scan(source: GitSource) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """({source id: (scope, text)}, {skipped path: reason}) after consuming the scan."""
    scan = source.scan()
    docs = {d.source_id: (d.scope, d.parts[0].text) for d in scan}
    return docs, {s.path: s.reason for s in scan.skipped}


def test_working_tree_indexes_only_tracked_docs_with_scopes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    write(repo, {"untracked.md": "# not added\n", "docs/guide.md": "# Guide\n\nEdited, not committed.\n"})
    docs, skipped = _scan(GitSource(root=repo))
    assert sorted(docs) == ["README.md", "docs/adr/0001-idempotency.md", "docs/guide.md", "notes.txt"]
    assert {k: v[0] for k, v in docs.items()} == {
        "README.md": "docs",
        "docs/adr/0001-idempotency.md": "adr",
        "docs/guide.md": "docs",
        "notes.txt": "docs",
    }
    assert docs["docs/guide.md"][1] == "# Guide\n\nEdited, not committed.\n"  # the working tree
    assert skipped == {}


def test_globs_and_scope_rules_are_configurable(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    source = GitSource(
        root=repo, globs=("*.md", "src/*.py"), scope_rules=(("docs/", "manual"), ("src/", "code"), ("", "misc"))
    )
    docs, _ = _scan(source)
    assert {k: v[0] for k, v in docs.items()} == {
        "README.md": "misc",
        "docs/adr/0001-idempotency.md": "manual",
        "docs/guide.md": "manual",
        "src/app.py": "code",
    }


def _bad_files(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside" / "secret.md"
    outside.parent.mkdir()
    outside.write_text("# Secret\n\nnot in the repo\n", encoding="utf-8")
    repo = make_repo(
        tmp_path / "repo",
        {
            "good.md": "# Good\n\nfine\n",
            "binary.md": b"PNG\x00\x01\x02" * 10,
            "latin1.txt": "café".encode("latin-1"),
            "big.md": b"a " * (5 * MB),  # 10 MB
        },
    )
    (repo / "escape.md").symlink_to(outside)
    (repo / "inside.md").symlink_to("good.md")
    commit_all(repo, "links")
    return repo, outside


EXPECTED_REASONS = {
    "binary.md": "binary file (NUL byte in the first 8 KiB)",
    "latin1.txt": "not valid UTF-8 (byte 3)",
    "big.md": f"larger than the limit ({10 * MB} bytes > {2 * MB})",
}


def test_bad_files_in_the_working_tree_are_skipped_with_reasons(tmp_path: Path) -> None:
    repo, outside = _bad_files(tmp_path)
    docs, skipped = _scan(GitSource(root=repo))
    assert sorted(docs) == ["good.md", "inside.md"]
    assert docs["inside.md"][1] == "# Good\n\nfine\n"
    assert skipped == {
        **EXPECTED_REASONS,
        "escape.md": f"resolves outside the indexed root ({outside.resolve()})",
    }


def test_bad_files_in_a_commit_are_skipped_with_reasons(tmp_path: Path) -> None:
    repo, outside = _bad_files(tmp_path)
    docs, skipped = _scan(GitSource(root=repo, ref="main"))
    assert sorted(docs) == ["good.md", "inside.md"]
    assert docs["inside.md"][1] == "# Good\n\nfine\n"  # an in-root link is followed in the tree
    assert skipped == {**EXPECTED_REASONS, "escape.md": f"resolves outside the indexed root ({outside})"}


def test_bad_files_are_listed_in_the_index_report(tmp_path: Path) -> None:
    repo, _ = _bad_files(tmp_path)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        report = engine.index(repo)
    assert (report.sources_seen, report.sources_indexed) == (6, 2)
    assert {s.path for s in report.skipped} == {"binary.md", "latin1.txt", "big.md", "escape.md"}
    assert report.complete is False


def test_ref_indexes_a_commit_without_checking_it_out(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.md": "# A\n\nalpha v1\n"})
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v1")
    write(repo, {"a.md": "# A\n\nalpha v2\n", "docs/b.md": "# B\n\nbeta\n"})
    commit_all(repo, "v2")
    write(repo, {"a.md": "# A\n\nalpha v3, uncommitted\n"})
    status_before = git(repo, "status", "--porcelain")

    docs, _ = _scan(GitSource(root=repo, ref="v1"))
    assert docs == {"a.md": ("docs", "# A\n\nalpha v1\n")}
    scan = GitSource(root=repo, ref="v1").scan()
    assert [d.metadata for d in scan] == [{"path": "a.md", "commit": first}]
    docs, _ = _scan(GitSource(root=repo, ref="main"))
    assert docs == {"a.md": ("docs", "# A\n\nalpha v2\n"), "docs/b.md": ("docs", "# B\n\nbeta\n")}
    docs, _ = _scan(GitSource(root=repo))
    assert docs["a.md"][1] == "# A\n\nalpha v3, uncommitted\n"

    assert git(repo, "status", "--porcelain") == status_before  # nothing checked out
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_ref_works_on_a_bare_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "bare.git"))
    docs, _ = _scan(GitSource(root=tmp_path / "bare.git", ref="main"))
    assert sorted(docs) == ["README.md", "docs/adr/0001-idempotency.md", "docs/guide.md", "notes.txt"]


def test_a_sub_folder_is_indexed_relative_to_itself(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    for ref in (None, "main"):
        docs, _ = _scan(GitSource(root=repo / "docs", ref=ref))
        assert sorted(docs) == ["adr/0001-idempotency.md", "guide.md"]


def test_unknown_ref_and_non_repository_are_source_errors(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    with pytest.raises(SourceError, match="'no-such-branch' does not name a commit"):
        GitSource(root=repo, ref="no-such-branch").scan()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceError, match="not a git repository"):
        GitSource(root=plain, ref="main").scan()
    with pytest.raises(SourceError, match="invalid git ref"):
        GitSource(root=repo, ref="--output=/tmp/x").scan()


def test_cli_indexes_a_commit_and_records_the_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", DOCS)
    store = str(tmp_path / "p.db")
    runner = CliRunner()
    result = runner.invoke(
        app, ["index", str(repo), "--ref", "main", "--store", store, "--embedder", "fake", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["sourcesSeen"], report["sourcesIndexed"], report["complete"]) == (4, 4, True)
    with Plait(store) as engine:
        roots = engine.recorded_roots("default")
        assert roots == [{"kind": "git", "path": str(repo.resolve()), "ref": "main"}]
        hit = engine.search("ERR-4012").hits[0]
        assert hit.scope == "adr"
        assert hit.origin == FileOrigin(
            source_path="docs/adr/0001-idempotency.md",
            heading_path=["ADR 0001: idempotency keys"],
            title="ADR 0001: idempotency keys",
        )
        assert hit.metadata["commit"] == git(repo, "rev-parse", "main")
    result = runner.invoke(app, ["index", str(repo), "--ref", "nope", "--store", store])
    assert result.exit_code == 1 and "'nope' does not name a commit" in result.stderr


def test_untracked_docs_are_named_in_the_report_and_by_explain(tmp_path: Path) -> None:
    """A git root reads tracked files only; the files it leaves out are said, not silent.

    Before, ``plait index`` of a repository whose docs were not yet added printed
    "0/0 sources indexed … complete" and explain said the file "was never indexed"."""
    repo = make_repo(tmp_path / "repo", DOCS)
    write(repo, {
        "docs/new-runbook.md": "# Runbook\n\nRestart the refund worker.\n",  # untracked
        "build/out.md": "# generated\n",  # ignored below
        "scratch.py": "x = 1\n",  # untracked, but not a doc
        ".gitignore": "build/\n",
    })
    scan = GitSource(root=repo).scan()
    assert sorted(d.source_id for d in scan) == ["README.md", "docs/adr/0001-idempotency.md", "docs/guide.md",
                                                  "notes.txt"]
    assert scan.untracked == ["docs/new-runbook.md"]
    store = str(tmp_path / "p.db")
    result = CliRunner().invoke(app, ["index", str(repo), "--store", store, "--embedder", "fake", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["sourcesSeen"], report["sourcesIndexed"], report["complete"]) == (4, 4, True)
    assert report["untracked"] == ["docs/new-runbook.md"]
    with Plait(store, embedder=FakeEmbedder()) as engine:
        explained = engine.explain("refund worker", path="docs/new-runbook.md")
    assert explained.ingestion.skipped is True
    assert explained.ingestion.message == (
        f"docs/new-runbook.md is not indexed from git:{repo.resolve()}: git does not track it "
        "(git add it, then reindex)"
    )
    text = CliRunner().invoke(app, ["index", str(repo), "--store", store, "--embedder", "fake"])
    assert "not tracked by git, not indexed (1; git add them to index them): docs/new-runbook.md" in " ".join(
        text.stdout.split()
    )


def test_reindex_names_the_untracked_docs_as_index_does(tmp_path: Path) -> None:
    """``plait reindex`` (and the engine's, so REST's) reported ``untracked: []`` where
    ``plait index`` of the same repository named the file: merging the root's report with
    the backfill's dropped the list."""
    repo = make_repo(tmp_path / "repo", DOCS)
    write(repo, {"docs/untracked-notes.md": "# Notes\n\nLocal only.\n"})
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=FakeEmbedder()) as engine:
        assert engine.index(repo).untracked == ["docs/untracked-notes.md"]
        assert engine.reindex().untracked == ["docs/untracked-notes.md"]
        assert engine.reindex(backfill=False).untracked == ["docs/untracked-notes.md"]
    result = CliRunner().invoke(app, ["reindex", "--store", store, "--embedder", "fake", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["untracked"] == ["docs/untracked-notes.md"]
