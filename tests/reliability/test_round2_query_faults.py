"""Issue 23 D8: provider faults at query time. A wrong-dimension query vector, a hanging
or dripping provider: the search answers lexically with the reason, within the total
deadline; after a failure the circuit opens (no provider call) until a probe succeeds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.embeddings.guard import DEFAULT_QUERY_DEADLINE
from plait.embeddings.remote import OllamaEmbedder
from plait.service import Plait
from plait.testing.corpus import documents
from plait.testing.wire import WireServer

DOCS = {f"doc-{i}": f"Runbook entry RB-{1000 + i}: restart the worker pool {i} times." for i in range(12)}


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[tuple[WireServer, str]]:
    with WireServer(dimension=16) as server:
        store = str(tmp_path / "p.db")
        with Plait(store, embedder=OllamaEmbedder(base_url=server.url, timeout=2.0)) as engine:
            engine.index_documents(documents(DOCS))
        server.requests.clear()
        yield server, store


def _embeds(server: WireServer) -> int:
    return sum(1 for r in server.requests if r.path == "/api/embed")


def test_the_default_deadline_is_at_most_five_seconds() -> None:
    assert DEFAULT_QUERY_DEADLINE == 5.0


def test_a_wrong_dimension_query_vector_falls_back_to_lexical(indexed: tuple[WireServer, str]) -> None:
    server, store = indexed
    server.wrong_dimension = True  # 17-d answers; a fresh client has no dimension to compare with
    with Plait(store, embedder=OllamaEmbedder(base_url=server.url, timeout=2.0)) as engine:
        result = engine.search("RB-1007")
        explained = engine.explain("RB-1007", doc="doc-7")
    assert result.vector_available is False
    assert result.vector_unavailable_reason == (
        "query embedding failed: the query vector has 17 dimensions, the collection's vectors 16"
    )
    assert [h.metadata["docId"] for h in result.hits][:1] == ["doc-7"]
    assert explained.dense.ran is False  # explain meets the open circuit, with the cause
    assert "the query vector has 17 dimensions" in (explained.dense.reason or "")


@pytest.mark.parametrize("fault", [{"delay": 30.0}, {"drip": 0.5}], ids=["hanging", "dripping"])
def test_a_slow_provider_costs_one_deadline_then_the_circuit_opens(
    indexed: tuple[WireServer, str], fault: dict[str, float]
) -> None:
    server, store = indexed
    for name, value in fault.items():
        setattr(server, name, value)
    # the client's own timeout (30 s per attempt, 2 retries) would allow ~91 s
    embedder = OllamaEmbedder(base_url=server.url, timeout=30.0, retries=2, backoff=0.01)
    with Plait(store, embedder=embedder, query_deadline=1.0, probe_interval=60.0) as engine:
        started = time.monotonic()
        first = engine.search("RB-1007")
        first_elapsed = time.monotonic() - started
        assert first.vector_available is False
        assert first.vector_unavailable_reason == "query embedding failed: query embedding took longer than the 1 s deadline"
        assert [h.metadata["docId"] for h in first.hits][:1] == ["doc-7"]
        assert first_elapsed < 1.0 + 1.5
        calls = _embeds(server)
        started = time.monotonic()
        second = engine.search("RB-1003")
        assert time.monotonic() - started < 0.5
        assert _embeds(server) == calls  # the provider was not called
        assert second.vector_available is False
        assert "circuit open after a failure" in (second.vector_unavailable_reason or "")
        assert "took longer than the 1 s deadline" in (second.vector_unavailable_reason or "")
        assert [h.metadata["docId"] for h in second.hits][:1] == ["doc-3"]
        server.delay, server.drip = 0.0, 0.0


def test_a_probe_closes_the_circuit_once_the_provider_is_back(indexed: tuple[WireServer, str]) -> None:
    server, store = indexed
    server.status = 500
    embedder = OllamaEmbedder(base_url=server.url, timeout=2.0, retries=0)
    with Plait(store, embedder=embedder, probe_interval=0.4) as engine:
        assert engine.search("RB-1001").vector_available is False
        assert _embeds(server) == 1
        server.status = None
        still_open = engine.search("RB-1001")
        assert still_open.vector_available is False and "circuit open" in (still_open.vector_unavailable_reason or "")
        assert _embeds(server) == 1
        time.sleep(0.5)
        probed = engine.search("RB-1001")  # this one is the probe
        assert probed.vector_available is True and _embeds(server) == 2
        assert engine.search("RB-1002").vector_available is True and _embeds(server) == 3


def test_a_probe_of_a_cached_query_asks_the_provider_and_keeps_the_circuit_open_while_it_fails(
    indexed: tuple[WireServer, str],
) -> None:
    # "RB-1001" is in the embedder's query cache; the provider then fails. The probe
    # for that same query used to be answered from the cache: the circuit closed with
    # the provider still down, and every new query waited for it again
    server, store = indexed
    embedder = OllamaEmbedder(base_url=server.url, timeout=2.0, retries=0)
    with Plait(store, embedder=embedder, probe_interval=0.4) as engine:
        assert engine.search("RB-1001").vector_available is True and _embeds(server) == 1
        server.status = 500
        assert engine.search("RB-1002").vector_available is False and _embeds(server) == 2  # opens
        time.sleep(0.5)
        probed = engine.search("RB-1001")  # the probe: cached, but the provider is asked
        assert _embeds(server) == 3
        assert probed.vector_available is False
        assert "500" in (probed.vector_unavailable_reason or "")
        assert engine.query_guard.state(embedder) == "open"
        after = engine.search("RB-1003")  # no provider call: the circuit is still open
        assert _embeds(server) == 3 and "circuit open" in (after.vector_unavailable_reason or "")
        server.status = None
        time.sleep(0.5)
        back = engine.search("RB-1001")  # the next probe reaches the provider, which answers
        assert back.vector_available is True and _embeds(server) == 4
        assert engine.query_guard.state(embedder) == "closed"
