"""A BEIR-format dataset written into a folder, for the evaluation tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_beir(
    root: Path,
    corpus: Sequence[Mapping[str, str]],
    queries: Mapping[str, str],
    qrels: Mapping[str, Sequence[tuple[str, str]]],
) -> Path:
    """``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (every pair graded 1)
    under ``root``; returns ``root``."""
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()), encoding="utf-8"
    )
    for split, pairs in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in pairs), encoding="utf-8"
        )
    return root
