"""Embedder and LLM faults end in a report that says what happened, with bounded retries,
no hang past the configured timeout, and nothing lost.

Covered elsewhere (not repeated here): the embedder clients' own retry/timeout/
malformed/wrong-shape handling (tests/embeddings/test_embeddings_remote.py), an
embedder on a closed port during indexing and the later backfill, a provider changing
dimension between runs (tests/test_ingest.py), an LLM on a closed port during ask
(tests/test_ask.py). Here: each fault *during indexing* through the service, a
flapping provider mid-run, a timing-out embedder at search time and a timing-out,
failing or garbling LLM during ask — each against a real HTTP server (WireServer).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.remote import OllamaEmbedder
from plait.llm.ollama import OllamaLLM
from plait.service import Plait
from plait.sources.base import SourceDocument
from plait.testing.corpus import documents
from plait.testing.wire import WireServer

# 12 one-chunk documents, each holding a unique identifier.
DOCS = {f"doc-{i}": f"Runbook entry RB-{1000 + i}: restart the worker pool {i} times." for i in range(12)}


def _docs() -> list[SourceDocument]:
    return documents(DOCS)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(dimension=16) as srv:
        yield srv


def _embed_requests(srv: WireServer) -> int:
    return sum(1 for r in srv.requests if r.path == "/api/embed")


def _batch_requests(srv: WireServer) -> int:
    """The embed requests of passage batches: a query (the ask gate's calibration at the end
    of an index run embeds some) goes alone."""
    return sum(1 for r in srv.requests if r.path == "/api/embed" and len(r.body["input"]) > 1)


def _all_lexical(engine: Plait) -> None:
    """Every document is findable by its identifier through the lexical arm."""
    for i in range(12):
        hits = engine.search(f"RB-{1000 + i}", k=1).hits
        assert [h.metadata["docId"] for h in hits] == [f"doc-{i}"]


@pytest.mark.parametrize(
    ("fault", "reason", "requests"),
    [
        ({"status": 500}, "500", 3),  # retried twice, then given up: no further batch is sent
        ({"status": 503}, "503", 3),
        ({"malformed": True}, "malformed JSON", 1),  # a garbled answer is not retried
        ({"delay": 5.0}, "timed out", 3),
    ],
    ids=["500", "503", "malformed", "timeout"],
)
def test_indexing_under_an_embedder_fault_writes_everything_lexically(
    tmp_path: Path, server: WireServer, fault: dict[str, object], reason: str, requests: int
) -> None:
    for name, value in fault.items():
        setattr(server, name, value)
    embedder = OllamaEmbedder(base_url=server.url, timeout=0.3, retries=2, backoff=0.01, batch_size=4)
    started = time.monotonic()
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        report = engine.index_documents(_docs())
        elapsed = time.monotonic() - started
        assert (report.chunks_added, report.complete) == (12, False)
        assert report.embedding.available is False
        assert (report.embedding.embedded, report.embedding.skipped) == (0, 12)
        assert reason in (report.embedding.reason or "")
        assert _embed_requests(server) == requests
        # 3 attempts of at most 0.3 s each plus backoff; generous slack for a loaded machine.
        assert elapsed < 3 * 0.3 + 5.0
        server.requests.clear()
        _all_lexical(engine)
        result = engine.search("restart the worker pool")
        assert result.vector_available is False and result.vector_unavailable_reason


def test_a_flapping_embedder_is_retried_per_batch_and_the_run_completes(
    tmp_path: Path, server: WireServer
) -> None:
    server.flap = True  # requests 1, 3, 5, … answer 500
    embedder = OllamaEmbedder(base_url=server.url, timeout=2.0, retries=1, backoff=0.01, batch_size=4)
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        report = engine.index_documents(_docs())
    assert report.complete is True
    assert (report.embedding.embedded, report.embedding.skipped, report.embedding.available) == (12, 0, True)
    # 12 texts in batches of 4 = 3 successful requests, each after one failed attempt.
    assert _batch_requests(server) == 6


def test_a_provider_that_changes_dimension_mid_run_is_reported(tmp_path: Path, server: WireServer) -> None:
    embedder = OllamaEmbedder(base_url=server.url, timeout=2.0, retries=0, batch_size=4)
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=embedder) as engine:
        engine.index_documents(documents({"doc-0": DOCS["doc-0"]}))
        server.wrong_dimension = True  # 17-d vectors from now on
        report = engine.index_documents(_docs())
        assert (report.chunks_added, report.chunks_unchanged) == (11, 1) and report.complete is False
        assert report.embedding.available is False
        assert report.embedding.skipped == 11
        assert "17-d" in (report.embedding.reason or "") and "16-d" in (report.embedding.reason or "")
        _all_lexical(engine)


def test_search_with_a_timing_out_embedder_answers_lexically_within_the_timeout(
    tmp_path: Path, server: WireServer
) -> None:
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=OllamaEmbedder(base_url=server.url, timeout=2.0)) as engine:
        engine.index_documents(_docs())
    server.delay = 5.0
    server.requests.clear()
    slow = OllamaEmbedder(base_url=server.url, timeout=0.3, retries=1, backoff=0.01)
    with Plait(store, embedder=slow) as engine:
        started = time.monotonic()
        result = engine.search("RB-1007")
        elapsed = time.monotonic() - started
    assert result.vector_available is False
    assert "timed out" in (result.vector_unavailable_reason or "")
    assert [h.metadata["docId"] for h in result.hits][:1] == ["doc-7"]
    assert _embed_requests(server) == 2
    assert elapsed < 2 * 0.3 + 5.0


@pytest.mark.parametrize(
    ("fault", "in_note", "requests"),
    [({"delay": 5.0}, "timed out", 2), ({"status": 500}, "500", 2), ({"malformed": True}, "malformed JSON", 1)],
    ids=["timeout", "500", "malformed"],
)
def test_ask_with_a_failing_llm_is_extractive_with_a_note(
    tmp_path: Path, server: WireServer, fault: dict[str, object], in_note: str, requests: int
) -> None:
    llm = OllamaLLM(base_url=server.url, model="m", timeout=0.3, retries=1, backoff=0.01)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), llm=llm) as engine:
        engine.index_documents(_docs())
        for name, value in fault.items():
            setattr(server, name, value)
        started = time.monotonic()
        # the gate as before calibration (0.5 of the words): this test is about the LLM
        # failing; twelve runbook lines of one template calibrate a stricter gate
        result = engine.ask("How many times do I restart the worker pool for RB-1005?", min_term_coverage=0.5)
        elapsed = time.monotonic() - started
    assert result.mode == "extractive"
    assert result.note is not None and result.note.startswith("the LLM (ollama/m) failed")
    assert in_note in result.note
    assert DOCS["doc-5"] in result.answer  # extracted from the retrieved chunks, cited
    assert result.citations
    assert sum(1 for r in server.requests if r.path == "/api/chat") == requests
    assert elapsed < 2 * 0.3 + 5.0
