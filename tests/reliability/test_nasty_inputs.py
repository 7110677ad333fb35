"""Nasty files and nasty queries.

A folder of hostile files indexes: the report lists the skipped ones with their
reasons and the rest are indexed and findable. Queries full of full-text syntax, SQL,
100,000 characters, empty or blank reach a real uvicorn server: each gets 200 or a
clear 422 — never a 500, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.types import FileOrigin

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

import httpx
from http_served import Served, serve_engine


def _nasty_corpus(root: Path) -> None:
    root.mkdir()
    (root / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (root / "nul.txt").write_bytes(b"ID-NUL-1 text with a \x00 NUL byte inside")
    (root / "latin1.md").write_bytes("# Relatório\n\nação ID-LATIN-1".encode("latin-1"))
    with (root / "huge.md").open("wb") as handle:  # 50 MB, sparse: skipped by size unread
        handle.seek(50 * 1024 * 1024 - 1)
        handle.write(b"\n")
    headings = "\n\n".join(f"{'#' * level} Level {level}\n\nbody at level {level}" for level in range(1, 10))
    (root / "deep_headings.md").write_text(headings + "\n\nID-DEEP-7 closes it.\n", encoding="utf-8")
    nested = "- " * 10_000 + "ID-NEST-10000 innermost item\n"
    staircase = "".join(" " * (2 * i) + f"- level {i}\n" for i in range(1000))
    (root / "nested_list.md").write_text(nested + "\n" + staircase, encoding="utf-8")
    (root / "long_line.md").write_text("x" * 100_000 + " ID-LONG-1 " + "y " * 50_000 + "\n", encoding="utf-8")
    (root / "bidi.md").write_text(
        "# \u202eRTL override\u202c\n\nمرحبا ID-BIDI-1 \u200fשלום\u200e zero\u200bwidth\ufeff joiner\u200d\n",
        encoding="utf-8",
    )
    (root / "empty.md").write_text("", encoding="utf-8")
    (root / "blank.md").write_text(" \n\t\n\u3000\n", encoding="utf-8")
    (root / "crlf.md").write_bytes(b"# Windows\r\n\r\nID-CRLF-1 line\r\nendings\r\n")


SKIPPED = {
    "image.md": "binary file",
    "nul.txt": "binary file",
    "latin1.md": "not valid UTF-8",
    "huge.md": "larger than the limit (52428800 bytes > 2097152)",
    "empty.md": "no text to index (empty or only whitespace)",
    "blank.md": "no text to index (empty or only whitespace)",
}
FINDABLE = {
    "ID-DEEP-7": "deep_headings.md",
    "ID-NEST-10000": "nested_list.md",
    "ID-LONG-1": "long_line.md",
    "ID-BIDI-1": "bidi.md",
    "ID-CRLF-1": "crlf.md",
}


def test_a_folder_of_nasty_files_indexes_and_reports_what_it_skipped(tmp_path: Path) -> None:
    root = tmp_path / "nasty"
    _nasty_corpus(root)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(root)
        reasons = {s.path: s.reason for s in report.skipped}
        assert set(reasons) == set(SKIPPED)
        for path, reason in SKIPPED.items():
            assert reason in reasons[path], (path, reasons[path])
        assert report.sources_seen == 11 and report.complete is False
        assert report.sources_indexed == 5  # empty.md and blank.md yield no chunk: skipped, not indexed
        stored = {s.source_id for s in engine.store.list_sources("default")}
        assert stored == set(FINDABLE.values())
        # The lexical arm's first hit for each identifier is its file (the fake
        # embedder's dense arm is noise, so the fused order is not asserted).
        top: dict[str, FileOrigin] = {}
        for identifier, path in FINDABLE.items():
            hits = [h for h in engine.search(identifier, k=5).hits if h.ranks.lexical == 1]
            origins = [h.origin for h in hits if isinstance(h.origin, FileOrigin)]
            assert [o.source_path for o in origins] == [path], identifier
            top[identifier] = origins[0]
        # 7+ heading levels: '#######' is not a heading, so level 6 is the deepest path.
        assert top["ID-DEEP-7"].heading_path == [f"Level {n}" for n in range(1, 7)]


def test_a_jsonl_corpus_with_hostile_lines_reports_each(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(
        b"\n".join(
            [
                json.dumps({"_id": "ok-1", "text": "ID-JSONL-1 fine"}).encode(),
                b"[" * 100_000,  # past the JSON decoder's recursion limit
                b"\xff\xfe not utf-8",
                b"{not json",
                json.dumps({"_id": "ok-2", "text": "ID-JSONL-2 fine"}).encode(),
            ]
        )
    )
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(corpus)
        reasons = {s.path: s.reason for s in report.skipped}
        assert set(reasons) == {"corpus.jsonl:2", "corpus.jsonl:3", "corpus.jsonl:4"}
        assert reasons["corpus.jsonl:2"] == "malformed line: JSON nested too deeply"
        assert report.sources_indexed == 2
        assert engine.search("ID-JSONL-2", k=1).hits[0].metadata["docId"] == "ok-2"


def test_a_jsonl_record_holding_a_lone_surrogate_is_reported_not_fatal(tmp_path: Path) -> None:
    # JSON may escape a lone surrogate ("\ud800"); UTF-8 cannot hold it: the store refused
    # it and the whole index failed ("a text contains a lone surrogate"), nothing indexed
    corpus = tmp_path / "corpus.jsonl"
    lines = [
        {"_id": "ok-1", "text": "ID-JSONL-1 fine"},
        {"_id": "bad-text", "title": "Fine title", "text": "hello \ud800 world"},
        {"id": "bad-\udfff-id", "text": "a document id that cannot be stored"},
        {"_id": "bad-meta", "text": "fine text", "lang": "e\ud83d"},
        {"_id": "nested", "text": "ID-JSONL-5 a nested field is not kept", "extra": {"k": "\ud800"}},
    ]
    corpus.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    tail = "text must be valid Unicode (UTF-8)"
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        report = engine.index(corpus)
        assert [(s.path, s.reason) for s in report.skipped] == [
            ("corpus.jsonl:2", f"malformed line: 'text' contains a lone surrogate (U+D800) at character 6: {tail}"),
            ("corpus.jsonl:3", f"malformed line: 'id' contains a lone surrogate (U+DFFF) at character 4: {tail}"),
            ("corpus.jsonl:4", f"malformed line: 'lang' contains a lone surrogate (U+D83D) at character 1: {tail}"),
        ]
        assert (report.sources_seen, report.sources_indexed, report.complete) == (5, 2, False)
        assert engine.search("ID-JSONL-5", k=1, mode="lexical").hits[0].metadata["docId"] == "nested"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_engine(tmp_path_factory.mktemp("served"), auth=False) as s:
        yield s


HOSTILE_QUERIES = [
    '"unterminated phrase',
    '"ERR-4012"',
    "payment*",
    "*",
    "(declined OR (timeout",
    "declined NEAR/3 payment",
    "NEAR(a b)",
    "card AND declined",
    "OR",
    "AND AND AND",
    "-declined",
    "--",
    "title:payment",
    ":",
    "'; DROP TABLE chunks; --",
    "' OR '1'='1",
    "1; SELECT * FROM sqlite_master",
    "\" UNION SELECT vector FROM chunks --",
    "%_%",
    "\\",
    "\x00",
    "\u202e\u200b",
    "ERR-4012 " * 5000,
    "x" * 100_000,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
@pytest.mark.parametrize("route", ["search", "explain"])
def test_hostile_queries_get_200_or_a_clear_422(served: Served, route: str, query: str) -> None:
    response = httpx.post(f"{served.url}/v1/collections/a/{route}", json={"query": query}, timeout=60)
    assert response.status_code in (200, 422), response.text[:300]
    assert "Traceback" not in response.text
    body = response.json()
    if response.status_code == 422:
        assert body["error"] and len(body["error"]) < 400
    else:
        assert body["query"] == query


def test_sql_injection_leaves_the_store_intact(served: Served) -> None:
    httpx.post(f"{served.url}/v1/collections/a/search", json={"query": "'; DROP TABLE chunks; --"})
    after = httpx.post(f"{served.url}/v1/collections/a/search", json={"query": "ERR-4012"}).json()
    assert after["hits"][0]["metadata"]["docId"] == "kb-101"


@pytest.mark.parametrize("query", ["", " ", "\t\n  "], ids=["empty", "space", "blank"])
def test_empty_and_blank_queries_are_a_clear_422(served: Served, query: str) -> None:
    response = httpx.post(f"{served.url}/v1/collections/a/search", json={"query": query})
    assert response.status_code == 422
    assert "query" in response.json()["error"]


@pytest.mark.parametrize(
    "body",
    [b"[" * 50_000, b'{"query": ' + b"[" * 50_000, b"\xff\xfe", b"null", b'{"query": null}', b'{"query": 7}'],
    ids=["deep-array", "deep-field", "not-utf8", "null", "null-query", "number-query"],
)
def test_malformed_bodies_are_a_clear_4xx(served: Served, body: bytes) -> None:
    """422 for a bad body. JSON nested past the decoder's recursion limit is Starlette's
    400 "There was an error parsing the body"; under a raised ``sys.getrecursionlimit()``
    (hypothesis raises it) the decoder reaches the end and it is our 422 instead."""
    response = httpx.post(
        f"{served.url}/v1/collections/a/search", content=body, headers={"content-type": "application/json"}
    )
    expected = {400, 422} if body.startswith((b"[[", b'{"query": [')) else {422}
    assert response.status_code in expected, response.text[:300]
    assert "Traceback" not in response.text and response.json()["error"]
