"""`plait eval` and `plait tune` as a user runs them, on a tiny BEIR dataset."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.search import SearchRequest, SearchService
from plait.stores import open_store
from plait.types import FusionSettings

runner = CliRunner()


def _eval(tiny: Path, cache: Path, *extra: str) -> dict:
    result = runner.invoke(
        app, ["eval", str(tiny), "--embedder", "fake", "--cache", str(cache), "--json", *extra]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _metrics(report: dict, strategy: str) -> dict[str, dict[str, float]]:
    found = next(s for s in report["strategies"] if s["strategy"] == strategy)
    return {item["slice"]: item["metrics"] for item in found["slices"]}


@pytest.fixture(autouse=True)
def _no_reranker_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAIT_CROSS_ENCODER", raising=False)
    monkeypatch.delenv("PLAIT_LLM", raising=False)


def test_eval_json_scores_every_strategy_per_slice(tiny_beir: Path, tmp_path: Path) -> None:
    report = _eval(tiny_beir, tmp_path / "cache")
    assert report["dataset"] == "tiny" and report["split"] == "test"
    assert report["queries"] == 4 and report["corpusDocs"] == 5 and report["chunks"] == 5
    assert report["sliceCounts"] == {"all": 4, "identifier": 2, "natural": 2}
    assert report["embedder"] == "fake/hash-64" and report["depth"] == 100
    assert "ir-measures" in report["metricProvider"]
    bm25 = _metrics(report, "bm25")
    # q1, q2, q4 find their only relevant document first; q3 matches nothing
    assert bm25["all"]["ndcg@10"] == pytest.approx(0.75)
    assert bm25["identifier"]["ndcg@10"] == pytest.approx(1.0)
    assert bm25["natural"]["ndcg@10"] == pytest.approx(0.5)
    assert bm25["all"]["recall@100"] == pytest.approx(0.75)
    assert bm25["all"]["mrr@10"] == pytest.approx(0.75)
    for name in ("vector", "rrf"):  # every chunk has a vector, so all 5 documents come back
        assert _metrics(report, name)["all"]["recall@100"] == pytest.approx(1.0)
        assert next(s for s in report["strategies"] if s["strategy"] == name)["meanDocs"] == 5.0
    rrf = next(s for s in report["strategies"] if s["strategy"] == "rrf")
    assert rrf["settings"]["method"] == "rrf" and rrf["settings"]["overfetch"] == 100
    reranked = next(s for s in report["strategies"] if s["strategy"] == "rrf+rerank")
    assert reranked["available"] is False and "cross-encoder" in reranked["reason"]
    assert {(c["strategy"], c["baseline"]) for c in report["comparisons"]} >= {("rrf", "bm25"), ("rrf", "vector")}


def test_a_second_run_reuses_the_embedding_cache(tiny_beir: Path, tmp_path: Path) -> None:
    first = _eval(tiny_beir, tmp_path / "cache", "--strategies", "vector")
    second = _eval(tiny_beir, tmp_path / "cache", "--strategies", "vector")
    assert first["cache"] == {"hits": 0, "embedded": 5}
    assert second["cache"] == {"hits": 5, "embedded": 0}
    assert second["index"]["embedding"]["skipped"] == 0
    assert _metrics(first, "vector") == _metrics(second, "vector")


def test_lexical_only_marks_dense_strategies_unavailable(tiny_beir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(tiny_beir), "--embedder", "none", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    by_name = {s["strategy"]: s for s in report["strategies"]}
    assert by_name["bm25"]["available"] is True
    for name in ("vector", "rrf", "weighted", "rrf+rerank"):
        assert by_name[name]["available"] is False
        assert by_name[name]["reason"] == "no embedder selected (lexical only)"


def test_html_report_embeds_the_plot(tiny_beir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report" / "out.html"
    result = runner.invoke(
        app,
        ["eval", str(tiny_beir), "--embedder", "fake", "--cache", str(tmp_path / "c"),
         "--strategies", "bm25,rrf", "--report", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "bm25" in result.stdout and "identifier" in result.stdout
    page = out.read_text(encoding="utf-8")
    assert "tiny" in page and "fake/hash-64" in page and "0.7500" in page
    match = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert match is not None
    assert base64.b64decode(match.group(1))[:8] == b"\x89PNG\r\n\x1a\n"


def test_user_errors_exit_1_with_one_line(tiny_beir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(tiny_beir), "--strategies", "bm25,magic", "--embedder", "none"])
    assert result.exit_code == 1
    assert "unknown strategies ['magic']" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["eval", str(tiny_beir), "--split", "dev", "--embedder", "none"])
    assert result.exit_code == 1 and "available: test, train" in result.output
    result = runner.invoke(app, ["tune", str(tiny_beir), "--embedder", "fake", "--save"])
    assert result.exit_code == 1 and "--save needs --store" in result.output


def test_tune_saves_the_chosen_settings_as_collection_defaults(tiny_beir: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "eval.db")
    result = runner.invoke(
        app,
        ["tune", str(tiny_beir), "--embedder", "fake", "--cache", str(tmp_path / "c"), "--store", store,
         "--folds", "2", "--save", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["queries"] == 4 and report["folds"] == 2 and len(report["foldResults"]) == 2
    assert report["gain"] == pytest.approx(report["heldOutScore"] - report["defaultScore"], abs=1e-6)
    assert report["savedTo"] == f"{store}#eval-tiny"
    chosen = FusionSettings.model_validate(report["chosen"])
    opened = open_store(store)
    try:
        assert SearchService(opened).settings_for("eval-tiny", SearchRequest(query="x")) == chosen
    finally:
        opened.close()


def test_tune_save_writes_knobs_not_the_estimate_it_read(tiny_beir: Path, tmp_path: Path) -> None:
    """--save wrote the whole FusionSettings: the arm estimate of that day (estimatedBase
    0.6011) and the built-in denseWeight 0.4 became saved settings, so a later estimate
    (here 0.45) was never read again by an adaptive search."""
    from plait.arm_estimate import estimate_record
    from plait.collection_settings import read_settings, write_settings

    store, cache = str(tmp_path / "eval.db"), str(tmp_path / "c")
    _eval(tiny_beir, tmp_path / "c", "--store", store, "--strategies", "bm25")
    figures = {"samples": 200, "lexicalMrr": 0.865, "denseMrr": 0.589, "lexicalSourceMrr": 0.966, "denseSourceMrr": 0.761}
    opened = open_store(store)
    try:
        write_settings(opened, "eval-tiny", arm_estimate=estimate_record(figures, 659))
    finally:
        opened.close()
    result = runner.invoke(
        app, ["tune", str(tiny_beir), "--embedder", "fake", "--cache", cache, "--store", store, "--folds", "2", "--save", "--json"]
    )
    assert result.exit_code == 0, result.output
    chosen = json.loads(result.stdout)["chosen"]
    opened = open_store(store)
    try:
        saved = read_settings(opened, "eval-tiny").fusion
        assert set(saved) == {"method", "rrfK", "lexicalWeight", "overfetch", "vectorWeight", "lexicalScoreWeight", "threshold"}
        assert {key: chosen[key] for key in saved} == saved
        lower = {**figures, "denseSourceMrr": 0.5}  # ratio 0.518 → the floor base 0.45
        write_settings(opened, "eval-tiny", arm_estimate=estimate_record(lower, 659))
        adaptive = SearchService(opened).settings_for("eval-tiny", SearchRequest(query="x", fusion="adaptive"))
        assert adaptive.estimated_base == 0.45
    finally:
        opened.close()


def test_a_report_path_that_cannot_be_written_is_one_line_before_the_run(tiny_beir: Path, tmp_path: Path) -> None:
    """A folder (or a path under a file) given to --report ran the whole evaluation and
    then ended in a traceback (IsADirectoryError, FileExistsError), the figures lost."""
    folder = tmp_path / "reports"
    folder.mkdir()
    result = runner.invoke(app, ["eval", str(tiny_beir), "--embedder", "none", "--report", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip() == f"error: --report {folder} is a folder; give a file name, e.g. {folder / 'report.html'}"
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x", encoding="utf-8")
    result = runner.invoke(app, ["eval", str(tiny_beir), "--embedder", "none", "--report", str(blocker / "r.html")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --report {blocker / 'r.html'}: cannot write in {blocker}"


def test_a_shallow_run_labels_its_recall_by_its_depth(tiny_beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (stop 43's noticed list): with --depth 3 the runs hold 3 documents, so the
    column said R@100 for what is recall@3."""
    monkeypatch.setenv("COLUMNS", "200")
    report = tmp_path / "report.html"
    result = runner.invoke(
        app, ["eval", str(tiny_beir), "--embedder", "fake", "--cache", str(tmp_path / "c"), "--depth", "3",
              "--strategies", "bm25", "--report", str(report)],
    )
    assert result.exit_code == 0, result.output
    (header,) = [line for line in result.stdout.splitlines() if "nDCG@10" in line and "strategy" in line]
    assert " R@3 " in header and "R@100" not in header
    html = report.read_text(encoding="utf-8")
    assert "<th>recall@3</th>" in html and "recall@100<" not in html
