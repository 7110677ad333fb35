"""`plait eval` on datasets as users hand them over: a byte-order mark, CRLF line ends,
qrels naming documents the corpus lacks, a split judging nothing relevant, a file given
as the folder. The figures are counted by hand on three queries.

BM25 ranks (lexical only): q1 "red fruit" → d1, d3, d2; q2 "orange root vegetables" →
d4, d6; q3 "yellow tropical bananas" → d2. Qrels: q1 {d1: 1, d3: 2}, q2 {d4: 1, d5: 1},
q3 {d2: 1}.

- q1: DCG = 1/log2(2) + 2/log2(3) = 2.261860; IDCG = 2 + 1/log2(3) = 2.630930 → nDCG@10
  0.859719; recall 1.
- q2: DCG = 1; IDCG = 1 + 1/log2(3) = 1.630930 → 0.613147; recall 1/2.
- q3: 1; recall 1.

Means: nDCG@10 (0.859719 + 0.613147 + 1) / 3 = 0.824289, recall@10 = 2.5 / 3 = 0.833333,
MRR@10 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app

runner = CliRunner()

CORPUS = [
    {"_id": "d1", "title": "Apples", "text": "Apples are red fruit that grow on apple trees in orchards."},
    {"_id": "d2", "title": "Bananas", "text": "Bananas are yellow fruit grown in tropical plantations."},
    {"_id": "d3", "title": "Cherries", "text": "Cherries are small red stone fruit picked in early summer."},
    {"_id": "d4", "title": "Carrots", "text": "Carrots are orange root vegetables rich in vitamin A."},
    {"_id": "d5", "title": "Potatoes", "text": "Potatoes are starchy tubers used for fries and mash."},
    {"_id": "d6", "title": "Spinach", "text": "Spinach is a leafy green vegetable with iron."},
]
QUERIES = {"q1": "red fruit", "q2": "orange root vegetables", "q3": "yellow tropical bananas"}
QRELS = [("q1", "d1", 1), ("q1", "d3", 2), ("q2", "d4", 1), ("q2", "d5", 1), ("q3", "d2", 1)]
BOM = "\ufeff"


def _write(root: Path, *, bom: bool = False, newline: str = "\n", qrels: list[tuple[str, str, int]] = QRELS) -> Path:
    (root / "qrels").mkdir(parents=True)
    start = BOM if bom else ""

    def write(path: Path, lines: list[str]) -> None:
        path.write_bytes((start + "".join(line + newline for line in lines)).encode("utf-8"))

    write(root / "corpus.jsonl", [json.dumps(d) for d in CORPUS])
    write(root / "queries.jsonl", [json.dumps({"_id": q, "text": t}) for q, t in QUERIES.items()])
    write(root / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{g}" for q, d, g in qrels)])
    return root


def _bm25(root: Path) -> tuple[dict, dict[str, float]]:
    result = runner.invoke(app, ["eval", str(root), "--embedder", "none", "--strategies", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return report, report["strategies"][0]["slices"][0]["metrics"]


def _assert_hand_counted(metrics: dict[str, float]) -> None:
    assert metrics["ndcg@10"] == pytest.approx(0.824289, abs=1e-6)
    assert metrics["recall@10"] == pytest.approx(2.5 / 3)
    assert metrics["recall@100"] == pytest.approx(2.5 / 3)
    assert metrics["mrr@10"] == pytest.approx(1.0)


def test_figures_match_the_hand_count(tmp_path: Path) -> None:
    report, metrics = _bm25(_write(tmp_path / "toy"))
    assert report["queries"] == 3 and report["chunks"] == 6 and report["relevantNotIndexed"] == []
    _assert_hand_counted(metrics)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_byte_order_mark_and_crlf_change_nothing(tmp_path: Path, newline: str) -> None:
    """A BOM made the qrels header a judgement ('score 'score' is not a number'), failed
    queries.jsonl as malformed JSON and silently dropped the corpus's first document."""
    report, metrics = _bm25(_write(tmp_path / "bom", bom=True, newline=newline))
    assert report["chunks"] == 6 and report["index"]["skipped"] == []
    _assert_hand_counted(metrics)


def test_relevant_documents_missing_from_the_corpus_are_named(tmp_path: Path) -> None:
    """They used to lower every figure without a word."""
    qrels = [("q1", "d1", 1), ("q1", "zz9", 1), ("q2", "d4", 1), ("q3", "nope", 1), ("q3", "d6", 0)]
    root = _write(tmp_path / "missing", qrels=qrels)
    report, metrics = _bm25(root)
    assert report["relevantNotIndexed"] == ["nope", "zz9"]
    # q1: d1 first of {d1, zz9} → DCG 1, IDCG 1 + 1/log2(3) → 0.613147, recall 1/2; q2: 1; q3: 0
    assert metrics["ndcg@10"] == pytest.approx((0.613147 + 1) / 3, abs=1e-6)
    assert metrics["recall@10"] == pytest.approx(1.5 / 3)
    text = runner.invoke(app, ["eval", str(root), "--embedder", "none", "--strategies", "bm25"])
    assert text.exit_code == 0, text.output
    assert "2 relevant documents of the qrels not in the index (every strategy misses them), e.g. nope, zz9" in text.stdout


def test_skipped_corpus_lines_are_reported_in_the_table_output(tmp_path: Path) -> None:
    root = _write(tmp_path / "skipped")
    with (root / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"_id": "d7", "text": \n')
    result = runner.invoke(app, ["eval", str(root), "--embedder", "none", "--strategies", "bm25"])
    assert result.exit_code == 0, result.output
    assert "1 corpus line not indexed, e.g. corpus.jsonl:7: malformed line:" in result.stdout


def test_a_split_judging_nothing_relevant_is_refused(tmp_path: Path) -> None:
    """Every figure read 0.0000, as if retrieval had failed."""
    root = _write(tmp_path / "zero", qrels=[("q1", "d1", 0), ("q2", "d4", 0)])
    result = runner.invoke(app, ["eval", str(root), "--embedder", "none"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        f"error: {root / 'qrels' / 'test.tsv'} judges 2 queries but no document relevant "
        "(every score is 0 or less): nothing can score above 0"
    ]


def test_a_file_given_as_the_dataset_folder_is_named_as_such(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "toy") / "corpus.jsonl"
    result = runner.invoke(app, ["eval", str(corpus), "--embedder", "none"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: dataset folder {corpus} is a file, not a folder; "
        "a BEIR dataset is a folder holding corpus.jsonl, queries.jsonl, qrels/"
    )


def test_a_fractional_grade_is_refused_not_truncated(tmp_path: Path) -> None:
    """int(float('0.5')) made the judgement a 0, so d1 silently stopped being relevant to q1."""
    root = _write(tmp_path / "fraction", qrels=[("q1", "d1", 1), ("q2", "d4", 1)])
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0.5\nq2\td4\t1.0\n", encoding="utf-8")
    result = runner.invoke(app, ["eval", str(root), "--embedder", "none"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: {root / 'qrels' / 'test.tsv'}:2: score '0.5' is not a whole number (grades are integers)"
    )


def test_a_pair_graded_twice_differently_is_refused_and_a_repeated_line_is_not(tmp_path: Path) -> None:
    """Regression (stop 43's noticed list): the later line won silently, so q1's d3 (grade 2
    on line 3) became a 0 when line 6 repeated the pair with grade 0."""
    conflicting = _write(tmp_path / "twice", qrels=[*QRELS, ("q1", "d3", 0)])
    result = runner.invoke(app, ["eval", str(conflicting), "--embedder", "none"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: {conflicting / 'qrels' / 'test.tsv'}:7: query 'q1', document 'd3' is graded 0 here "
        "and 2 on line 3; keep one judgement"
    )
    repeated = _write(tmp_path / "repeated", qrels=[*QRELS, ("q1", "d3", 2)])
    _assert_hand_counted(_bm25(repeated)[1])
