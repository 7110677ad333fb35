"""One file, one recorded root (:mod:`plait.sources.nesting`): a folder inside a recorded
root is indexed as part of it; a root around recorded roots leaves their folders to them,
on index and on every reindex. Real SQLite store, real files, the fake embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from git_helpers import commit_all, make_repo, write
from plait.cli import app
from plait.errors import ConflictError
from plait.service import Plait

GUIDE = "# Guide\n\nThe ledger reconciles payments nightly.\n"
SQLITE = "# ADR 1: Use SQLite\n\nWe store the ledger in SQLite.\n"
EVENTS = "# ADR 2: Events\n\nOrders are event sourced.\n"
QUEUE = "# ADR 3: A queue\n\nPayments go through a queue.\n"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """docs/guide.md and two ADRs under docs/adr/: one chunk each."""
    folder = tmp_path / "docs"
    write(folder, {"guide.md": GUIDE, "adr/0001-sqlite.md": SQLITE, "adr/0002-events.md": EVENTS})
    return folder


def _sources(engine: Plait) -> dict[str, tuple[str, str]]:
    """Stored source id → (scope, the key of the root that owns it)."""
    return {s.source_id: (s.scope, s.root) for s in engine.store.list_sources("default")}


def _roots(engine: Plait) -> list[str]:
    return [str(r["path"]) for r in engine.recorded_roots("default")]


def test_a_folder_inside_a_recorded_root_is_indexed_as_part_of_it(engine: Plait, docs: Path) -> None:
    engine.index(docs)
    key = f"folder:{docs.resolve()}"
    before = {
        "guide.md": ("docs", key),
        "adr/0001-sqlite.md": ("adr", key),
        "adr/0002-events.md": ("adr", key),
    }
    assert _sources(engine) == before

    report = engine.index(docs / "adr")
    assert _sources(engine) == before  # no second copy under ids relative to docs/adr
    assert _roots(engine) == [str(docs.resolve())]  # and no root recorded for docs/adr
    assert (report.sources_seen, report.sources_indexed, report.chunks_unchanged) == (2, 2, 2)
    assert (report.chunks_added, report.added_sources, report.deleted_sources) == (0, [], [])
    assert report.part_of_root == str(docs.resolve()) and report.nested_roots_left == []
    hits = engine.search("ledger SQLite").hits  # every file once: the fake dense arm returns them all
    assert sorted(h.origin.source_path for h in hits) == sorted(before)

    # the folder's run syncs the folder only: its deleted file goes, one deleted elsewhere stays
    (docs / "adr" / "0002-events.md").unlink()
    (docs / "guide.md").unlink()
    write(docs, {"adr/0003-queue.md": QUEUE})
    report = engine.index(f"{docs / 'adr'}/")  # a trailing slash names the same folder
    assert _sources(engine) == {
        "guide.md": ("docs", key),  # outside docs/adr: a reindex of docs deletes it, not this run
        "adr/0001-sqlite.md": ("adr", key),
        "adr/0003-queue.md": ("adr", key),  # scoped by docs's conventions (adr/ → adr)
    }
    assert (report.added_sources, report.deleted_sources, report.sources_deleted) == (
        ["adr/0003-queue.md"], ["adr/0002-events.md"], 1
    )
    assert report.part_of_root == str(docs.resolve())
    assert engine.reindex().deleted_sources == ["guide.md"]


def test_the_part_takes_the_roots_options_and_symlinks_resolve(engine: Plait, docs: Path, tmp_path: Path) -> None:
    rules = [("adr/", "decisions"), ("", "handbook")]
    engine.index(docs, scope_rules=rules)
    alias = tmp_path / "alias"
    alias.symlink_to(docs / "adr", target_is_directory=True)
    write(docs, {"adr/0003-queue.md": QUEUE})
    report = engine.index(alias)  # no options given: the root's apply; the same given: accepted too
    again = engine.index(docs / "adr", scope_rules=rules)
    assert {k: scope for k, (scope, _) in _sources(engine).items()} == {
        "guide.md": "handbook",
        "adr/0001-sqlite.md": "decisions",
        "adr/0002-events.md": "decisions",
        "adr/0003-queue.md": "decisions",
    }
    assert _roots(engine) == [str(docs.resolve())]
    assert report.added_sources == ["adr/0003-queue.md"] and again.added_sources == []
    assert report.part_of_root == again.part_of_root == str(docs.resolve())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"globs": ["*.txt"]}, "globs: given *.txt, the root's *.md"),
        ({"scope_rules": [("", "notes")]}, "scope rules: given =notes, the root's =docs"),
        ({"max_bytes": 10}, "max_bytes: given 10, the root's 4096"),
    ],
)
def test_options_that_differ_from_the_roots_are_refused_with_nothing_written(
    engine: Plait, docs: Path, options: dict[str, object], said: str
) -> None:
    engine.index(docs, globs=["*.md"], scope_rules=[("", "docs")], max_bytes=4096)
    write(docs, {"adr/notes.txt": "Plain notes on the ledger.\n", "adr/0003-queue.md": QUEUE})
    sources, settings = _sources(engine), engine.store.get_settings("default")
    with pytest.raises(ConflictError) as raised:
        engine.index(docs / "adr", **options)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f"lies inside {docs.resolve()}, a recorded root" in message and said in message
    assert f"plait index {docs.resolve()}" in message and f"plait reindex --source {docs.resolve()}" in message
    assert _sources(engine) == sources and engine.store.get_settings("default") == settings


def test_a_root_around_a_recorded_root_leaves_its_files_to_it_on_index_and_reindex(
    engine: Plait, docs: Path
) -> None:
    adr = docs / "adr"
    engine.index(adr)
    inner = f"folder:{adr.resolve()}"
    outer = f"folder:{docs.resolve()}"

    report = engine.index(docs)
    expected = {
        "0001-sqlite.md": ("docs", inner),
        "0002-events.md": ("docs", inner),
        "guide.md": ("docs", outer),
    }
    assert _sources(engine) == expected
    assert _roots(engine) == [str(adr.resolve()), str(docs.resolve())]
    assert (report.sources_seen, report.added_sources, report.deleted_sources) == (1, ["guide.md"], [])
    assert report.nested_roots_left == [str(adr.resolve())] and report.part_of_root is None

    # docs's reindex leaves docs/adr alone: neither its new file nor its deleted one
    (adr / "0002-events.md").unlink()
    write(adr, {"0003-queue.md": QUEUE})
    report = engine.reindex(source=docs)
    assert _sources(engine) == expected
    assert (report.sources_seen, report.added_sources, report.deleted_sources) == (1, [], [])
    assert report.nested_roots_left == [str(adr.resolve())]

    # a reindex of every root: docs/adr syncs its own files, docs still leaves them
    report = engine.reindex()
    assert _sources(engine) == {
        "0001-sqlite.md": ("docs", inner),
        "0003-queue.md": ("docs", inner),
        "guide.md": ("docs", outer),
    }
    assert (report.added_sources, report.deleted_sources) == (["0003-queue.md"], ["0002-events.md"])
    assert report.nested_roots_left == [str(adr.resolve())]
    # coverage reads each root as its runs do: every file present once, none vanished
    (row,) = engine.coverage().scopes
    assert (row.sources_present, row.sources_indexed, row.sources_vanished) == (3, 3, 0)


def test_git_roots_nest_by_ref_and_other_kinds_never_nest(engine: Plait, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": GUIDE, "docs/adr/0001-sqlite.md": SQLITE})
    engine.index(repo)
    report = engine.index(repo / "docs")  # a folder of the working tree: part of the repository's root
    assert sorted(_sources(engine)) == ["README.md", "docs/adr/0001-sqlite.md"]
    assert report.part_of_root == str(repo.resolve()) and report.sources_seen == 1

    # another ref is another root: docs/adr at HEAD is not part of the working tree's root
    assert engine.index(repo / "docs" / "adr", ref="HEAD").added_sources == ["0001-sqlite.md"]
    assert len(_roots(engine)) == 2
    # in a collection of commits: the repository at HEAD around docs/adr at HEAD leaves it that folder
    adr = str((repo / "docs" / "adr").resolve())
    engine.index(repo / "docs" / "adr", ref="HEAD", collection="commits")
    write(repo, {"docs/adr/0002-events.md": EVENTS})
    commit_all(repo, "a second ADR")
    report = engine.index(repo, ref="HEAD", collection="commits")
    stored = {s.source_id: s.root for s in engine.store.list_sources("commits")}
    assert stored == {"0001-sqlite.md": f"git:{adr}@HEAD", "README.md": f"git:{repo.resolve()}@HEAD"}
    assert (report.nested_roots_left, report.added_sources) == ([adr], ["README.md"])

    # a .jsonl file inside a recorded folder is a root of its own kind
    corpus = tmp_path / "notes"
    write(corpus, {"readme.md": GUIDE, "corpus.jsonl": json.dumps({"_id": "n1", "text": "A note."}) + "\n"})
    engine.index(corpus)
    assert engine.index(corpus / "corpus.jsonl").part_of_root is None
    assert str((corpus / "corpus.jsonl").resolve()) in _roots(engine)


def test_cli_says_the_folder_was_indexed_as_part_of_the_root(tmp_path: Path, docs: Path) -> None:
    store = str(tmp_path / "cli.db")
    runner = CliRunner()
    common = ["--store", store, "--embedder", "fake"]
    assert runner.invoke(app, ["index", str(docs), *common]).exit_code == 0
    done = runner.invoke(app, ["index", str(docs / "adr"), *common], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert f"indexed as part of the recorded root {docs.resolve()}, with its options" in text
    done = runner.invoke(app, ["index", str(docs / "adr"), *common, "--json"])
    report = json.loads(done.stdout)
    assert (report["partOfRoot"], report["nestedRootsLeft"], report["sourcesSeen"]) == (str(docs.resolve()), [], 2)
    refused = runner.invoke(app, ["index", str(docs / "adr"), *common, "--glob", "*.txt"])
    assert refused.exit_code != 0 and "plait index" in " ".join(refused.output.split())



def test_a_recorded_root_inside_another_is_reindexed_by_index_not_made_part_of_it(
    engine: Plait, docs: Path
) -> None:
    """Regression: docs/adr recorded first, then docs around it; 'plait index docs/adr'
    took docs/adr as part of docs — whose runs leave docs/adr to its own root — so it read
    nothing, said 'indexed as part of the recorded root docs' and 'left to docs/adr', and
    the new ADR was never indexed; docs/adr's own options, given again, were refused as
    differing from docs's."""
    adr = docs / "adr"
    inner = f"folder:{adr.resolve()}"
    engine.index(adr)
    engine.index(docs)
    write(adr, {"0003-queue.md": QUEUE})

    report = engine.index(adr)
    assert (report.part_of_root, report.nested_roots_left) == (None, [])
    assert (report.sources_seen, report.added_sources) == (3, ["0003-queue.md"])
    assert _sources(engine)["0003-queue.md"] == ("docs", inner)
    assert sorted(_roots(engine)) == [str(docs.resolve()), str(adr.resolve())]

    engine.index(adr, globs=["*.md"])  # its own options, which docs's are not
    write(adr, {"0004-more.md": EVENTS})
    assert engine.index(adr, globs=["*.md"]).added_sources == ["0004-more.md"]
    assert _sources(engine)["0004-more.md"] == ("docs", inner)


def test_a_hidden_folder_inside_a_folder_root_is_a_root_of_its_own(engine: Plait, docs: Path) -> None:
    """Regression: docs's walk ignores hidden folders, yet 'plait index docs/.notes' indexed
    .notes as part of docs ('indexed as part of the recorded root docs'), and the next
    reindex of docs, which never reads .notes, deleted it as vanished."""
    write(docs, {".notes/ledger.md": GUIDE})
    notes = docs / ".notes"
    engine.index(docs)
    report = engine.index(notes)
    assert (report.part_of_root, report.added_sources) == (None, ["ledger.md"])
    assert sorted(_roots(engine)) == [str(docs.resolve()), str(notes.resolve())]
    again = engine.reindex()
    assert (again.deleted_sources, again.nested_roots_left) == ([], [])
    assert _sources(engine)["ledger.md"] == ("docs", f"folder:{notes.resolve()}")
