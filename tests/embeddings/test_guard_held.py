"""The query guard takes a vector the embedder already holds without its deadline thread
(the hot path: a repeated query paid a thread start, ~0.3 ms and up to milliseconds on a
busy machine, for a dictionary look-up), and changes nothing else: the circuit, the
dimension check and the provider calls stay as they were."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plait.embeddings.base import TextKind, held_query
from plait.embeddings.cache import CachedEmbedder
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.guard import QueryGuard
from plait.errors import ProviderResponseError, ProviderUnavailableError
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents


class _Failing(FakeEmbedder):
    """A fake whose query embeddings fail while ``down`` is set."""

    down = False

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "query" and self.down:
            raise ProviderUnavailableError("provider down")
        return super()._embed_batch(texts, kind)


def _count_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the guard embedded in its deadline thread, in order."""
    threaded: list[str] = []
    bounded = QueryGuard._bounded

    def counting(self: QueryGuard, embedder: Any, text: str, **options: Any) -> np.ndarray:
        threaded.append(text)
        return bounded(self, embedder, text, **options)

    monkeypatch.setattr(QueryGuard, "_bounded", counting)
    return threaded


def test_a_repeated_query_takes_the_held_vector_without_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threaded = _count_threads(monkeypatch)
    embedder = FakeEmbedder(dimension=32)
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        threaded.clear()  # indexing's own pseudo-queries (the arm estimate) are not searches
        calls = embedder.calls
        first = engine.search("why was my card declined", k=3)
        second = engine.search("why was my card declined", k=3)
    assert threaded == ["why was my card declined"]  # the second search started no thread
    assert embedder.calls == calls + 1  # one provider call for both, as before
    assert second.vector_available is True
    assert [(h.chunk_id, h.score, h.ranks) for h in second.hits] == [(h.chunk_id, h.score, h.ranks) for h in first.hits]


def test_an_open_circuit_refuses_a_held_vector_too() -> None:
    guard = QueryGuard()
    embedder = _Failing(dimension=8)
    held = guard.embed_query(embedder, "alpha", dimension=8)
    embedder.down = True
    with pytest.raises(ProviderUnavailableError, match="provider down"):
        guard.embed_query(embedder, "beta", dimension=8)
    with pytest.raises(ProviderUnavailableError, match="circuit open"):
        guard.embed_query(embedder, "alpha", dimension=8)  # held, but searches stay lexical
    assert guard.state(embedder) == "open"
    assert held.shape == (8,)


def test_a_held_vector_of_the_wrong_dimension_opens_the_circuit() -> None:
    guard = QueryGuard()
    embedder = FakeEmbedder(dimension=8)
    guard.embed_query(embedder, "alpha", dimension=8)
    with pytest.raises(ProviderResponseError, match="the query vector has 8 dimensions, the collection's vectors 16"):
        guard.embed_query(embedder, "alpha", dimension=16)
    assert guard.state(embedder) == "open" and guard.failures == 1


def test_the_embedding_cache_wrapper_shows_the_wrapped_embedders_held_vector() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner, path=":memory:")
    assert cached.cached_query("alpha") is None
    vector = cached.embed_query("alpha")
    held = cached.cached_query("alpha")
    assert held is not None and np.array_equal(held, vector)


class _OwnQueries(FakeEmbedder):
    """Answers ``embed_query`` its own way (down means down, cache or not), as the
    observability test's switchable provider does."""

    down = False

    def embed_query(self, text: str) -> np.ndarray:
        if self.down:
            raise ProviderUnavailableError("provider down")
        return super().embed_query(text)


def test_an_embedder_answering_queries_its_own_way_is_always_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its query cache holds the vector, but its ``embed_query`` says the provider is
    down: the guard asks it (the search goes lexical), never the cache behind its back."""
    threaded = _count_threads(monkeypatch)
    guard = QueryGuard()
    embedder = _OwnQueries(dimension=8)
    guard.embed_query(embedder, "alpha", dimension=8)
    assert embedder.cached_query("alpha") is not None and held_query(embedder, "alpha") is None
    embedder.down = True
    with pytest.raises(ProviderUnavailableError, match="provider down"):
        guard.embed_query(embedder, "alpha", dimension=8)
    assert threaded == ["alpha", "alpha"]


def test_an_embed_query_patched_on_the_object_is_always_asked() -> None:
    embedder = FakeEmbedder(dimension=8)
    embedder.embed_query("alpha")
    assert held_query(embedder, "alpha") is not None
    embedder.embed_query = lambda text: np.zeros(8, dtype=np.float32)  # type: ignore[method-assign]
    assert held_query(embedder, "alpha") is None


def test_a_held_vector_leaves_a_circuit_another_search_opened_open(monkeypatch: pytest.MonkeyPatch) -> None:
    # review-4: the held path ran the success bookkeeping and closed the circuit; a cache
    # look-up is no news of the provider, so a circuit opened meanwhile (here: while the
    # look-up runs, by another query failing) must stay open
    guard = QueryGuard(deadline=5.0)
    embedder = _Failing(dimension=32)
    vector = embedder.embed_query("held question")  # cached now
    import plait.embeddings.guard as guard_module

    def look_up_while_another_search_fails(inner: Any, text: str) -> np.ndarray | None:
        if text == "held question":
            embedder.down = True
            with pytest.raises(ProviderUnavailableError):
                guard.embed_query(embedder, "a new question", dimension=32)
            assert guard.state(embedder) == "open"
        return held_query(inner, text)

    monkeypatch.setattr(guard_module, "held_query", look_up_while_another_search_fails)
    got = guard.embed_query(embedder, "held question", dimension=32)
    assert np.array_equal(got, vector)
    assert guard.state(embedder) == "open"


class _Evicting(dict[str, np.ndarray]):
    """A query cache whose entry another thread evicts between the look-up and the reorder."""

    def move_to_end(self, key: str, last: bool = True) -> None:
        raise KeyError(key)


def test_a_cached_vector_evicted_meanwhile_is_still_returned() -> None:
    # review-4: embed_query's cache hit reordered without the guard cached_query has, so
    # a concurrent eviction raised KeyError out of a search
    embedder = FakeEmbedder(dimension=32)
    vector = embedder.embed_query("question")
    embedder._query_cache = _Evicting({"question": vector})  # type: ignore[assignment]
    assert np.array_equal(embedder.embed_query("question"), vector)


class _Attempts(_Failing):
    """Counts the query batches asked of the provider, failed ones included."""

    attempts = 0

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "query":
            self.attempts += 1
        return super()._embed_batch(texts, kind)


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "cached-embedder"])
def test_a_probe_is_a_provider_call_even_for_a_cached_query(tmp_path: Path, wrapped: bool) -> None:
    clock = [0.0]
    guard = QueryGuard(probe_interval=10.0, clock=lambda: clock[0])
    inner = _Attempts(dimension=8)
    embedder: Any = CachedEmbedder(inner, path=tmp_path / "c.db") if wrapped else inner
    guard.embed_query(embedder, "alpha", dimension=8)  # one call; "alpha" is now cached
    inner.down = True
    with pytest.raises(ProviderUnavailableError, match="provider down"):
        guard.embed_query(embedder, "beta", dimension=8)
    clock[0] = 11.0
    assert inner.attempts == 2  # alpha, beta
    with pytest.raises(ProviderUnavailableError, match="provider down"):  # the cache did not answer it
        guard.embed_query(embedder, "alpha", dimension=8)
    assert inner.attempts == 3 and guard.state(embedder) == "open"
    inner.down = False
    clock[0] = 22.0
    assert guard.embed_query(embedder, "alpha", dimension=8).shape == (8,)
    assert inner.attempts == 4 and guard.state(embedder) == "closed"
    assert guard.embed_query(embedder, "alpha", dimension=8).shape == (8,)
    assert inner.attempts == 4  # closed again: the cache answers
