"""A tiny BEIR dataset written into tmp_path, with hand-checkable BM25 outcomes.

Test split: q1 and q4 carry identifiers and their documents are the only ones with
their terms; q2 (natural) matches only d2; q3 (natural) shares no term with any
document, so the lexical arm returns nothing for it. ``qt`` is a train-split query
that must never be evaluated on the test split.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beir_files import write_beir

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
    return write_beir(tmp_path / "tiny", CORPUS, QUERIES, {"test": TEST_QRELS, "train": [("qt", "d4")]})
