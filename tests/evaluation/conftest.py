"""A tiny BEIR dataset written into tmp_path, with hand-checkable BM25 outcomes.

Test split: q1 and q4 carry identifiers and their documents are the only ones with
their terms; q2 (natural) matches only d2; q3 (natural) shares no term with any
document, so the lexical arm returns nothing for it. ``qt`` is a train-split query
that must never be evaluated on the test split.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS = [
    {"_id": "d1", "title": "Checkout errors", "text": "ERR-4012 means the payment gateway timed out during checkout."},
    {"_id": "d2", "title": "Kangaroos", "text": "The kangaroo habitat spans the Australian outback and grasslands."},
    {"_id": "d3", "title": "Music", "text": "A marimba is a percussion instrument with wooden bars."},
    {"_id": "d4", "title": "Sessions", "text": "Refreshing expired session tokens keeps users signed in."},
    {"_id": "d5", "title": "Stock", "text": "Inventory counts for SKU-88213-B are updated nightly."},
]
QUERIES = {
    "q1": "ERR-4012 timed out",
    "q2": "where do kangaroos live",
    "q3": "xylophone",
    "q4": "SKU-88213-B inventory",
    "qt": "session tokens",
}
TEST_QRELS = [("q1", "d1"), ("q2", "d2"), ("q3", "d3"), ("q4", "d5")]


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS), encoding="utf-8")
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()), encoding="utf-8"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in TEST_QRELS), encoding="utf-8"
    )
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nqt\td4\t1\n", encoding="utf-8")
    return root
