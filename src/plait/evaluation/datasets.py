"""BEIR-format datasets: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

The evaluated queries are the ones the qrels file judges (``queries.jsonl`` may hold
several splits), which is also what BEIR does. A judgement with score > 0 is relevant;
graded scores are kept for nDCG. The corpus is not loaded here: it is indexed straight
from ``corpus.jsonl`` by :class:`plait.sources.jsonl.JsonlSource`, the same reader
``plait index corpus.jsonl`` uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from plait.errors import SourceError

__all__ = ["BeirDataset", "Qrels", "load_beir"]

Qrels = dict[str, dict[str, int]]
"""query id → {document id → relevance grade}."""


@dataclass(frozen=True, kw_only=True)
class BeirDataset:
    """A BEIR dataset on disk: the corpus path, the judged queries and their qrels."""

    name: str
    root: Path
    split: str
    queries: dict[str, str]
    qrels: Qrels

    @property
    def corpus_path(self) -> Path:
        return self.root / "corpus.jsonl"

    @property
    def query_ids(self) -> list[str]:
        """Judged query ids, in qrels file order."""
        return list(self.qrels)

    def corpus_size(self) -> int:
        """Number of non-empty lines in ``corpus.jsonl``."""
        with self.corpus_path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())


def _read_qrels(path: Path) -> Qrels:
    """The judgements of ``path``; a pair judged twice must be judged alike (a repeated
    line is harmless, two grades for one pair are a mistake in the file: which is meant?)."""
    qrels: Qrels = {}
    first_line: dict[tuple[str, str], int] = {}
    with path.open(encoding="utf-8-sig") as handle:  # a byte-order mark is not part of the header
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if number == 1 and parts[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue
            if len(parts) != 3:
                raise SourceError(
                    f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>score', got {line.strip()!r}"
                )
            qid, did, score = (p.strip() for p in parts)
            try:
                value = float(score)
            except ValueError:
                raise SourceError(f"{path}:{number}: score {score!r} is not a number") from None
            if not value.is_integer():  # int() would make 0.5 a 0: not relevant, silently
                raise SourceError(f"{path}:{number}: score {score!r} is not a whole number (grades are integers)")
            grade = int(value)
            judged = qrels.setdefault(qid, {})
            if did in judged and judged[did] != grade:
                raise SourceError(
                    f"{path}:{number}: query {qid!r}, document {did!r} is graded {grade} here "
                    f"and {judged[did]} on line {first_line[(qid, did)]}; keep one judgement"
                )
            first_line.setdefault((qid, did), number)
            judged[did] = grade
    return qrels


def _read_queries(path: Path, wanted: set[str]) -> dict[str, str]:
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SourceError(f"{path}:{number}: malformed JSON: {exc}") from None
            qid = str(record.get("_id", record.get("id", "")))
            if qid in wanted:
                text = record.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise SourceError(f"{path}:{number}: query {qid!r} has no text")
                queries[qid] = text
    return queries


def load_beir(root: str | Path, *, split: str = "test") -> BeirDataset:
    """Read a BEIR dataset's judged queries and qrels for ``split``.

    Raises :class:`~plait.errors.SourceError` when a file is missing or malformed, or a
    judged query has no text in ``queries.jsonl``.
    """
    base = Path(root).expanduser()
    if not base.is_dir():
        state = "is a file, not a folder" if base.exists() else "does not exist"
        raise SourceError(f"dataset folder {base} {state}; a BEIR dataset is a folder holding corpus.jsonl, queries.jsonl, qrels/")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (base / name).is_file():
            raise SourceError(f"{base} has no {name}; a BEIR dataset needs corpus.jsonl, queries.jsonl, qrels/")
    qrels_path = base / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        splits = sorted(p.stem for p in (base / "qrels").glob("*.tsv")) if (base / "qrels").is_dir() else []
        raise SourceError(
            f"split {split!r} has no qrels file {qrels_path}; available: {', '.join(splits) or 'none'}"
        )
    qrels = _read_qrels(qrels_path)
    if not qrels:
        raise SourceError(f"{qrels_path} judges no query")
    if not any(grade > 0 for docs in qrels.values() for grade in docs.values()):
        raise SourceError(
            f"{qrels_path} judges {len(qrels)} {'query' if len(qrels) == 1 else 'queries'} but no document "
            "relevant (every score is 0 or less): "
            "nothing can score above 0"
        )
    queries = _read_queries(base / "queries.jsonl", set(qrels))
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise SourceError(
            f"{len(missing)} judged queries are missing from queries.jsonl, e.g. {missing[:3]}"
        )
    return BeirDataset(
        name=base.resolve().name, root=base, split=split, queries=queries, qrels=qrels
    )
