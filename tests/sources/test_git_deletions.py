"""A tracked file deleted from a git working tree, the deletion not committed: the working
tree does not have it, so it is neither read nor skipped — an index run lists it once, as
deleted (it used to be listed as skipped too, and the run as incomplete, forever after),
and explain says it is deleted from the working tree. Real git, real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from git_helpers import make_repo
from plait.cli import app
from plait.sources.git import GitSource

FILES = {
    "a.md": "# Alpha\n\nThe alpha guide talks about widgets.\n",
    "b.md": "# Beta\n\nBeta covers gizmos and sprockets.\n",
    "c.md": "# Gamma\n\nGamma is about doohickeys.\n",
}


def test_the_scan_neither_reads_nor_skips_a_deleted_tracked_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    (repo / "b.md").unlink()
    scan = GitSource(root=repo).scan()
    assert [doc.source_id for doc in scan] == ["a.md", "c.md"]
    assert scan.skipped == []
    assert (scan.seen, scan.total) == (2, 2)
    assert scan.uncommitted_deletions == ["b.md"]


def test_an_uncommitted_deletion_is_listed_once_as_deleted_and_explained(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    store = str(tmp_path / "plait.db")
    runner = CliRunner()
    env = {"COLUMNS": "400"}
    common = ["--store", store, "--embedder", "fake"]
    first = runner.invoke(app, ["index", str(repo), *common], env=env)
    assert first.exit_code == 0, first.output
    (repo / "b.md").unlink()  # not committed: git still tracks it

    second = runner.invoke(app, ["index", str(repo), *common], env=env)
    assert second.exit_code == 0, second.output
    lines = second.stdout.splitlines()
    assert not [line for line in lines if "skipped" in line]
    assert lines[0] == "default: 2/2 sources indexed · chunks +0 ~0 =2 -1"
    assert "1 vanished sources deleted" in lines
    assert "deleted (1): b.md" in lines
    assert lines[-1].startswith("complete in ")

    again = runner.invoke(app, ["reindex", "--store", store, "--json"], env=env)
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["skipped"], report["deletedSources"], report["complete"]) == ([], [], True)
    assert (report["sourcesSeen"], report["sourcesIndexed"]) == (2, 2)

    shown = runner.invoke(app, ["explain", "gizmos", "--path", "b.md", "--store", store], env=env)
    assert shown.exit_code == 0, shown.output
    said = (
        f"b.md is not indexed from git:{repo}: it is deleted from the working tree (git still tracks it: "
        "the deletion is not committed)"
    )
    (ingestion,) = [line for line in shown.stdout.splitlines() if line.startswith("ingestion")]
    (diagnosis,) = [line for line in shown.stdout.splitlines() if line.startswith("diagnosis")]
    assert ingestion == f"ingestion  {said}"
    assert diagnosis == f"diagnosis  [not-indexed] ingestion: {said}"
