"""Build the identifier query set (BEIR format) in ``benchmarks/data/identifiers/``.

Run from the repository root (deterministic; re-running rewrites the same files)::

    PYTHONPATH=src .venv/bin/python benchmarks/build_identifier_set.py

How it is built — mechanically, with no query written or chosen by hand except the
article's two:

* **corpus** — every Markdown file under ``examples/docs/`` cut at its level-2
  headings (``## …``); the text before the first one is its own section. Each section
  is a document: ``_id`` is ``<path relative to examples/>#<n>`` (n = section number,
  0-based), ``title`` its heading (the file's title for section 0), ``text`` its body.
  The article's five documents (seeds/001, ``kb-101`` … ``kb-105``) are added as-is.
* **queries** — every identifier-like token (:func:`plait.autoweight.identifier_like`)
  that occurs, as a whole whitespace-separated token with its edge punctuation and
  backticks stripped, in exactly one section of the corpus (so the judgement is
  unambiguous), turned into ``what does <token> mean`` — one fixed template for all.
  Tokens of fewer than 4 characters are left out (``v1``, ``2s``: fragments, not
  lookups). Plus the article's two identifier queries with its own judgements:
  ``what does ERR-4012 mean`` → ``kb-101`` and ``stock wrong for SKU-88213-B`` →
  ``kb-103`` (the first overlaps a runbook section too; both are judged relevant).
* **qrels** — ``qrels/test.tsv``: each query → the one section holding the token
  (grade 1).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from plait.autoweight import identifier_like
from plait.testing.corpus import ARTICLE_DOCS

OUT = ROOT / "benchmarks" / "data" / "identifiers"
EXAMPLES = ROOT / "examples"
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
ARTICLE_QUERIES = {
    "article-1": ("what does ERR-4012 mean", ["kb-101"]),
    "article-2": ("stock wrong for SKU-88213-B", ["kb-103"]),
}


def sections(path: Path) -> list[tuple[str, str]]:
    """(title, body) per level-2 section; section 0 is the text before the first ``##``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        else:
            out[-1][1].append(line)
    first_title = next((ln.lstrip("#").strip() for ln in lines if ln.startswith("# ")), path.name)
    result = []
    for _n, (title, body) in enumerate(out):
        text = "\n".join(body).strip()
        if text:
            result.append((title or first_title, text))
    return result


def main() -> None:
    corpus: list[dict[str, str]] = []
    for path in sorted((EXAMPLES / "docs").rglob("*.md")):
        relative = path.relative_to(EXAMPLES).as_posix()
        for n, (title, text) in enumerate(sections(path)):
            corpus.append({"_id": f"{relative}#{n}", "title": title, "text": text})
    for doc_id, text in ARTICLE_DOCS.items():
        corpus.append({"_id": doc_id, "title": "", "text": text})

    where: dict[str, set[str]] = defaultdict(set)
    for doc in corpus:
        for raw in f"{doc['title']} {doc['text']}".split():
            token = _EDGE.sub("", raw.strip("`*"))
            if len(token) >= 4 and identifier_like(token):
                where[token].add(doc["_id"])
    queries: dict[str, str] = {}
    qrels: list[tuple[str, str]] = []
    for n, token in enumerate(sorted(t for t, docs in where.items() if len(docs) == 1)):
        qid = f"id-{n:03d}"
        queries[qid] = f"what does {token} mean"
        qrels.append((qid, next(iter(where[token]))))
    for qid, (text, relevant) in ARTICLE_QUERIES.items():
        queries[qid] = text
        token = text.split()[-1] if qid == "article-2" else "ERR-4012"
        extra = sorted(where.get(token, set()) - set(relevant)) if qid == "article-1" else []
        qrels.extend((qid, doc) for doc in [*relevant, *extra])

    (OUT / "qrels").mkdir(parents=True, exist_ok=True)
    with (OUT / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc in corpus:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with (OUT / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for qid, text in queries.items():
            handle.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with (OUT / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid, relevant_id in qrels:
            handle.write(f"{qid}\t{relevant_id}\t1\n")
    print(f"{len(corpus)} documents, {len(queries)} queries, {len(qrels)} judgements → {OUT}")


if __name__ == "__main__":
    main()
