"""The CLI as a user runs it: index the examples, search, JSON output, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    result = runner.invoke(app, ["index", str(EXAMPLES), "--store", path, "--embedder", "fake", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sourcesIndexed"] == report["sourcesSeen"] > 10
    assert report["complete"] is True and report["embedding"]["skipped"] == 0
    return path


def test_search_json_is_the_api_model(store: str) -> None:
    result = runner.invoke(app, ["search", "what does ERR-4012 mean", "--store", store, "--json", "-k", "8"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["k"] == 8 and len(data["hits"]) == 8
    top = data["hits"][0]
    assert top["origin"]["sourcePath"] == "docs/runbooks/checkout-errors.md"
    assert any("ERR-4012" in part for part in top["origin"]["headingPath"])
    # The badge follows the ranks (which arm ranks which chunk depends on the fake
    # embedder's hashed vectors of the visible text, so no fixed badge for the top hit).
    for hit in data["hits"]:
        ranked = (hit["ranks"]["lexical"] is not None, hit["ranks"]["dense"] is not None)
        assert hit["match"] == {(True, True): "both", (True, False): "lexical", (False, True): "semantic"}[ranked]
    assert any(hit["match"] == "both" for hit in data["hits"])
    lexical_first = next(h for h in data["hits"] if h["ranks"]["lexical"] == 1)
    assert any("ERR-4012" in part for part in lexical_first["origin"]["headingPath"])
    # the default fusion is adaptive: the echo names the dense weight it used and why
    assert data["fusion"]["method"] == "adaptive" and 0.0 <= data["fusion"]["denseWeightUsed"] <= 1.0
    assert data["fusion"]["fusionReason"]


def test_scopes_from_paths(store: str) -> None:
    result = runner.invoke(app, ["search", "idempotency keys", "--store", store, "--json", "--scope", "adr"])
    data = json.loads(result.stdout)
    assert data["hits"] and all(h["scope"] == "adr" for h in data["hits"])
    assert all(h["origin"]["sourcePath"].startswith("docs/adr/") for h in data["hits"])


def test_table_output(store: str) -> None:
    result = runner.invoke(app, ["search", "SKU-88213-B", "--store", store, "--debug"])
    assert result.exit_code == 0, result.output
    assert "inventory-stale-stock.md" in result.stdout
    assert "timings" in result.stdout


def test_collections_and_reindex(store: str) -> None:
    listed = json.loads(runner.invoke(app, ["collections", "--store", store, "--json"]).stdout)
    assert [c["name"] for c in listed] == ["default"]
    assert listed[0]["embedderProvider"] == "fake" and listed[0]["chunksWithoutVector"] == 0
    again = json.loads(runner.invoke(app, ["reindex", "--store", store, "--json"]).stdout)
    assert again["chunksAdded"] == 0 and again["chunksUnchanged"] == listed[0]["chunks"]
    assert again["embedding"]["embedded"] == 0


def test_user_errors_exit_1_without_traceback(store: str) -> None:
    result = runner.invoke(app, ["search", "x", "--store", store, "--collection", "missing"])
    assert result.exit_code == 1
    assert "collection 'missing' does not exist" in result.stderr
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["search", "", "--store", store])
    assert result.exit_code == 1 and "query is empty" in result.stderr
    result = runner.invoke(app, ["search", "x", "--store", store, "--embedder", "bogus"])
    assert result.exit_code == 1 and "bogus" in result.stderr
    # a message quoting the user's input is printed as text, never read as rich markup
    # (a MarkupError traceback before), and on one line whatever its length
    odd = "/tmp/[/x]" + "-long" * 30
    result = runner.invoke(app, ["reindex", "--store", store, "--source", odd])
    assert result.exit_code == 1, result.output
    assert result.stderr == f"error: {odd} is not a recorded source of collection 'default' (recorded: {EXAMPLES})\n"


def test_a_failed_first_command_leaves_no_store_file(tmp_path: Path) -> None:
    """``plait index /no/such/folder --store new.db`` left an empty 150 KB store; a store
    that already holds a collection is never removed, whatever fails."""
    db = tmp_path / "new.db"
    missing = str(tmp_path / "no-such-folder")
    result = runner.invoke(app, ["index", missing, "--store", str(db), "--embedder", "fake"])
    assert result.exit_code == 1 and "does not exist" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    assert runner.invoke(app, ["index", str(docs), "--store", str(db), "--embedder", "fake"]).exit_code == 0
    result = runner.invoke(app, ["index", missing, "--store", str(db), "--embedder", "fake"])
    assert result.exit_code == 1 and db.is_file()
    shown = runner.invoke(app, ["search", "alpha", "--store", str(db), "--embedder", "fake", "--json"])
    assert json.loads(shown.stdout)["hits"][0]["origin"]["sourcePath"] == "a.md"


def test_the_library_removes_only_a_new_empty_store_after_a_failure(tmp_path: Path) -> None:
    from plait.service import Plait

    with pytest.raises(RuntimeError), Plait(str(tmp_path / "failed.db"), embedder=None):
        raise RuntimeError("boom")
    with Plait(str(tmp_path / "fine.db"), embedder=None):
        pass  # no failure: the (empty) store the caller asked for stays
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["fine.db"]
