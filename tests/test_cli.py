"""The CLI as a user runs it: index the examples, search, JSON output, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

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


def _two_arm_store(tmp_path: Path) -> str:
    """A store where each arm ranks a different document first: a (lexical 1, dense 2) and
    b (lexical 2, dense 1)."""
    from plait.service import Plait
    from plait.testing.corpus import documents

    store = str(tmp_path / "plait.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents({"a": "refund refund refund refund policy", "b": "refund policy"}))
    return store


def _search_json(query: list[str], *flags: str) -> dict[str, Any]:
    done = runner.invoke(app, ["search", *query, "--json", *flags])
    assert done.exit_code == 0, done.output
    return cast(dict[str, Any], json.loads(done.stdout))


def test_dense_weight_flag_is_the_fusion_objects_dense_weight(tmp_path: Path) -> None:
    """``--fusion minmax|dbsf|adaptive`` had no flag for their ``denseWeight`` (HTTP and Python
    take it in a fusion object), so explain's advice for them sent users to RRF instead.
    ``--dense-weight`` is that knob; the service alone refuses what does not fit."""
    store = _two_arm_store(tmp_path)
    query = ["refund policy", "--store", store]

    def search(*flags: str) -> dict[str, Any]:
        return _search_json(query, *flags)

    # a: lexical 1, dense 2; b: lexical 2, dense 1. Min-max over two candidates puts each
    # arm's best at 1 and the other at 0, so minmax scores (1 − w)·lexical + w·dense are
    # w = 0.8: b 0.8·1 = 0.8, a 0.2·1 = 0.2; w = 0.3: a 0.7, b 0.3 — the weight turns the order
    data = search("--fusion", "minmax", "--dense-weight", "0.8")
    assert data["fusionAsked"] == {"fusion": {"method": "minmax", "denseWeight": 0.8}}
    assert (data["fusion"]["method"], data["fusion"]["denseWeight"], data["fusion"]["denseWeightUsed"]) == (
        "minmax", 0.8, 0.8)
    assert data["fusionDecided"]["parameters"] == {"denseWeight": 0.8, "overfetch": 50}
    ranked = [(h["metadata"]["docId"], h["ranks"]["lexical"], h["ranks"]["dense"]) for h in data["hits"]]
    assert ranked == [("b", 2, 1), ("a", 1, 2)]
    assert [h["score"] for h in data["hits"]] == [pytest.approx(0.8), pytest.approx(0.2)]
    lighter = search("--fusion", "minmax", "--dense-weight", "0.3")
    assert [(h["metadata"]["docId"], h["score"]) for h in lighter["hits"]] == [
        ("a", pytest.approx(0.7)), ("b", pytest.approx(0.3))]
    # adaptive takes it as its base, beside its language prior (both go into the object)
    adaptive = search("--fusion", "adaptive", "--dense-weight", "0.6", "--no-language-prior")
    assert adaptive["fusionDecided"]["parameters"] == {
        "denseWeight": 0.6, "denseWeightFrom": "settings", "languagePrior": False, "overfetch": 50}
    shown = runner.invoke(app, ["search", *query, "--fusion", "dbsf", "--dense-weight", "0.8"])
    assert "fusion dbsf (dense weight used 0.8: dbsf: fixed dense weight 0.8 (lexical 0.2))" in shown.stdout
    # what does not fit is the service's one-line error, as over HTTP
    refused = {
        ("--fusion", "rrf", "--dense-weight", "0.5"):
            "fusion: denseWeight does not apply to fusion 'rrf' (fusion object): it takes k, lexicalWeight",
        ("--fusion", "minmax", "--dense-weight", "1.5"): "fusion: denseWeight: Input should be less than or equal to 1",
        ("--fusion", "minmax", "--dense-weight", "0.5", "--lexical-weight", "0.3"):
            "fusion: lexicalWeight does not apply to fusion 'minmax' (fusion object): it takes denseWeight",
    }
    for flags, message in refused.items():
        for command in ("search", "explain"):
            target = ["--doc", "a"] if command == "explain" else []
            done = runner.invoke(app, [command, *query, *target, *flags])
            assert (done.exit_code, done.stderr) == (1, f"error: {message}\n"), (command, flags, done.output)


def test_explain_advice_names_the_dense_weight_flag_and_takes_it(tmp_path: Path) -> None:
    """Explain's advice under minmax/dbsf/adaptive named ``--fusion rrf --lexical-weight``
    (the CLI had no flag for their weight); it names ``--dense-weight``, and explain takes it."""
    store = _two_arm_store(tmp_path)
    why = runner.invoke(
        app, ["explain", "refund policy", "--doc", "a", "-k", "1", "--store", store, "--json",
              "--fusion", "minmax", "--dense-weight", "0.8"],
    )
    assert why.exit_code == 0, why.output
    data = json.loads(why.stdout)
    # a: lexical 1, dense 2, fused 2 at 0.2·1 + 0.8·0 = 0.2, past the cut at 1
    assert (data["fusion"]["rank"], data["fusion"]["score"]) == (2, pytest.approx(0.2))
    assert data["fusion"]["settings"]["denseWeight"] == 0.8
    assert data["diagnosis"]["message"] == (
        "both arms found it (lexical 1, dense 2, fused 2) but fusion ranked it past the cut at 1: raise k to 2, "
        "or lean fusion towards the lexical arm, which ranks it better: "
        'fusion {"method": "minmax", "denseWeight": 0.6} (now 0.8; CLI: --fusion minmax --dense-weight 0.6)'
    )
    # the advice, followed twice (0.8 → 0.6 → 0.4): a 0.6 over b 0.4, returned
    followed = runner.invoke(
        app, ["explain", "refund policy", "--doc", "a", "-k", "1", "--store", store, "--json",
              "--fusion", "minmax", "--dense-weight", "0.4"],
    )
    assert followed.exit_code == 0, followed.output
    assert (json.loads(followed.stdout)["fusion"]["rank"], json.loads(followed.stdout)["fusion"]["score"]) == (
        1, pytest.approx(0.6))


def test_dense_weight_without_fusion_is_the_collections_methods(tmp_path: Path) -> None:
    """``--dense-weight`` without ``--fusion`` was refused with 'a fusion object needs a method
    … (got None)', about an object the user never typed. It sends a fusion object without a
    method, which the service reads as the collection's saved method (else adaptive) with
    that knob, as over HTTP and in Python; a saved method that takes no dense weight is
    named in the error, with the knobs it takes and the flags that would work."""
    store = _two_arm_store(tmp_path)
    query = ["refund policy", "--store", store]

    def run(*flags: str) -> dict[str, Any]:
        return _search_json(query, *flags)

    def save(method: str) -> None:
        from plait.service import Plait

        with Plait(store, embedder="fake") as engine:
            engine.store.update_settings("default", {"fusion": {"method": method}})

    # a: lexical 1, dense 2; b: lexical 2, dense 1. Min-max over two candidates puts each arm's
    # best at 1 and the other at 0. The default, adaptive, takes it as the base its per-query
    # weight moves around: both arms' top-1 gap over their spread is 1, so it stays 0.8 and
    # the scores are (1 − 0.8)·lexical + 0.8·dense: b 0.8, a 0.2
    data = run("--dense-weight", "0.8")
    assert data["fusionAsked"] == {"fusion": {"denseWeight": 0.8}}
    decided = data["fusionDecided"]
    assert (decided["method"], decided["methodFrom"], decided["denseWeightUsed"]) == ("adaptive", "default", 0.8)
    assert decided["parameters"] == {
        "denseWeight": 0.8, "denseWeightFrom": "settings", "languagePrior": True, "overfetch": 50}
    assert [(h["metadata"]["docId"], h["score"]) for h in data["hits"]] == [
        ("b", pytest.approx(0.8)), ("a", pytest.approx(0.2))]
    # with --no-language-prior, inside the same object
    assert run("--dense-weight", "0.8", "--no-language-prior")["fusionDecided"]["parameters"]["languagePrior"] is False

    save("minmax")  # the collection's own method: minmax at 0.3 is a 0.7·1 = 0.7, b 0.3·1 = 0.3
    data = run("--dense-weight", "0.3")
    assert data["fusionAsked"] == {"fusion": {"denseWeight": 0.3}}
    assert (data["fusion"]["method"], data["fusion"]["denseWeight"], data["fusion"]["denseWeightUsed"]) == (
        "minmax", 0.3, 0.3)
    assert (data["fusionDecided"]["methodFrom"], data["fusionDecided"]["parameters"]) == (
        "collection", {"denseWeight": 0.3, "overfetch": 50})
    assert [(h["metadata"]["docId"], h["score"]) for h in data["hits"]] == [
        ("a", pytest.approx(0.7)), ("b", pytest.approx(0.3))]
    why = runner.invoke(app, ["explain", *query, "--doc", "b", "-k", "1", "--json", "--dense-weight", "0.3"])
    assert why.exit_code == 0, why.output
    fused = json.loads(why.stdout)["fusion"]  # b: fused 2 at 0.3, past the cut at 1
    assert (fused["settings"]["method"], fused["settings"]["denseWeight"], fused["rank"]) == ("minmax", 0.3, 2)
    assert fused["score"] == pytest.approx(0.3)
    shown = runner.invoke(app, ["search", *query, "--dense-weight", "0.3"], env={"COLUMNS": "200"})  # a line, unwrapped
    assert "fusion minmax (dense weight used 0.3: minmax: fixed dense weight 0.3 (lexical 0.7))" in shown.stdout

    # a saved method that takes no dense weight: named, with what it takes and what would work
    way_out = (
        "name a method that takes denseWeight: 'minmax', 'dbsf' or 'adaptive', "
        'e.g. fusion {"method": "minmax", "denseWeight": 0.8} (CLI: --fusion minmax --dense-weight 0.8)'
    )
    refused = {
        "rrf": "denseWeight does not apply to fusion 'rrf' (the collection's method), which takes k and "
        f"lexicalWeight (CLI: --lexical-weight); {way_out}",
        "weighted": "denseWeight does not apply to fusion 'weighted' (the collection's method), which takes "
        f"vectorWeight, lexicalWeight and threshold; {way_out}",
    }
    for method, message in refused.items():
        save(method)
        for command, target in (("search", []), ("explain", ["--doc", "a"])):
            done = runner.invoke(app, [command, *query, *target, "--dense-weight", "0.8"])
            assert (done.exit_code, done.stderr) == (1, f"error: {message}\n"), (command, method, done.output)
    # the way the message names works
    assert run("--fusion", "minmax", "--dense-weight", "0.8")["fusionDecided"]["methodFrom"] == "request"


def test_search_and_explain_take_the_http_request_s_rrf_k_threshold_meta_and_group_by(tmp_path: Path) -> None:
    """Regression (helper walk-through, stop 44): the CLI had no --rrf-k or --threshold,
    and explain no --meta or --group-by. a: lexical 1, dense 2; b: lexical 2, dense 1."""
    store = _two_arm_store(tmp_path)
    rrf = _search_json(["refund policy"], "--store", store, "--fusion", "rrf", "--rrf-k", "10")
    assert rrf["fusion"]["rrfK"] == 10
    assert [h["score"] for h in rrf["hits"]] == pytest.approx([1 / 11 + 1 / 12] * 2)  # 1/(k + rank) per arm
    strict = _search_json(["refund policy"], "--store", store, "--fusion", "weighted", "--threshold", "0.95")
    assert strict["fusion"]["threshold"] == 0.95 and [h["metadata"]["docId"] for h in strict["hits"]] == ["b"]
    done = runner.invoke(app, ["explain", "refund policy", "--doc", "a", "--store", store, "--meta", "docId=b", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["diagnosis"] == {
        "code": "filtered",
        "stage": "filters",
        "message": "filters: its chunks (scope docs) do not pass the request's filters (metadata docId=b)",
    }
    grouped = runner.invoke(
        app, ["explain", "refund policy", "--doc", "a", "--store", store, "-k", "1", "--group-by", "source", "--json"]
    )
    assert grouped.exit_code == 0, grouped.output
    assert json.loads(grouped.stdout)["diagnosis"]["code"] == "fusion-worked"
    bad = runner.invoke(app, ["explain", "refund policy", "--doc", "a", "--store", store, "--meta", "docId"])
    assert bad.exit_code == 1 and "--meta 'docId' is not KEY=VALUE" in bad.output


def test_explain_of_a_document_of_several_chunks_prints_each_chunk_s_journey(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (helper walk-through, stop 44): the CLI named each stage's best chunk by
    id only and printed no chunk table (the web page and --json have one), so where the
    document's other chunks went was not on the terminal. RRF k=60: Setup is lexical 1 and
    dense 1 (2/61 = 0.0328), Troubleshooting 2 and 2 (2/62 = 0.0323), Overview dense 3 only
    (1/63 = 0.0159)."""
    monkeypatch.setenv("COLUMNS", "200")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "widget.md").write_text(
        "# Widget guide\n\n## Overview\n\n" + "The widget keeps your calendars in step across devices. " * 12
        + "\n\n## Setup\n\nInstall the widget, then set the sync interval in minutes. "
        + "It checks the server at that interval. " * 10
        + "\n\n## Troubleshooting\n\n" + "If events go missing, clear the cache and sync again. " * 12 + "\n",
        encoding="utf-8",
    )
    (docs / "other.md").write_text("# Other\n\nA note about the office kitchen rota.\n", encoding="utf-8")
    store = str(tmp_path / "s.db")
    assert runner.invoke(app, ["index", str(docs), "--store", store, "--embedder", "fake"]).exit_code == 0
    done = runner.invoke(
        app, ["explain", "install sync interval", "--path", "widget.md", "--store", store, "-k", "1", "--fusion", "rrf"]
    )
    assert done.exit_code == 0, done.output
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("│")}
    assert list(rows) == ["1 of 3", "2 of 3", "3 of 3"]
    overview, setup, trouble = rows["1 of 3"], rows["2 of 3"], rows["3 of 3"]
    assert overview[0] == "Widget guide › Overview" and overview[1] == "—" and overview[3:5] == ["#3 · 0.0159", "cut: top-k"]
    assert setup[0] == "Widget guide › Setup" and setup[1].startswith("#1 · ") and setup[3:5] == ["#1 · 0.0328", "returned"]
    assert trouble[1].startswith("#2 · ") and trouble[3:5] == ["#2 · 0.0323", "cut: top-k"]
    assert "each chunk of the document (3)" in done.stdout
    single = runner.invoke(app, ["explain", "kitchen rota", "--path", "other.md", "--store", store])
    assert single.exit_code == 0 and "each chunk of the document" not in single.stdout  # one chunk: the lines say it all
