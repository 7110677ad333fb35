"""EnsembleEmbedder: the parts' unit vectors side by side, scaled so a dot product is the
weighted mean of the parts' cosines; queries only use the parts that read their language."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plait.embeddings import E5MiniLMEmbedder, EnsembleEmbedder, FakeEmbedder, make_embedder, registry_name
from plait.embeddings.cache import CachedEmbedder
from plait.errors import ConfigError, ModelMismatchError
from plait.service import Plait
from plait.testing.corpus import documents


def _parts() -> tuple[FakeEmbedder, FakeEmbedder]:
    multi = FakeEmbedder(dimension=16, model="multi")
    english = FakeEmbedder(dimension=8, model="english")
    multi.languages, english.languages = frozenset({"en", "pt"}), frozenset({"en"})
    return multi, english


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_dot_product_is_the_weighted_mean_of_the_parts_cosines() -> None:
    multi, english = _parts()
    duo = EnsembleEmbedder([(multi, 3.0), (english, 1.0)])
    assert duo.weights == (0.75, 0.25) and duo.dimension == 24
    assert duo.model == "multi@0.75+english@0.25" and duo.provider == "fake"
    query, passages = "what is the deadline", ["the deadline is Friday", "pasta recipes"]
    q, p = duo.embed_query(query), duo.embed_documents(passages)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-6)
    assert np.linalg.norm(p, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)
    mq, mp = multi.embed_query(query), multi.embed_documents(passages)
    eq, ep = english.embed_query(query), english.embed_documents(passages)
    for row in range(2):
        expected = 0.75 * _cos(mq, mp[row]) + 0.25 * _cos(eq, ep[row])
        assert float(p[row] @ q) == pytest.approx(expected, abs=1e-5)


def test_a_query_in_a_language_one_part_does_not_read_leaves_that_part_out() -> None:
    multi, english = _parts()
    duo = EnsembleEmbedder([(multi, 1.0), (english, 1.0)])
    query, passage = "qual é o prazo de entrega", "o prazo é sexta-feira"
    q, p = duo.embed_query(query), duo.embed_documents([passage])[0]
    assert duo.query_parts(query) == (True, False)
    assert np.all(q[16:] == 0) and np.linalg.norm(q) == pytest.approx(1.0, abs=1e-6)
    # the ranking is the multilingual part's alone: cosine scaled by √½ (the passage's share)
    assert float(p @ q) == pytest.approx(np.sqrt(0.5) * _cos(multi.embed_query(query), multi.embed_documents([passage])[0]), abs=1e-5)
    # undetermined (no stopword) or English: every part
    assert duo.query_parts("ERR-4012 SKU-88213-B") == (True, True)
    assert duo.query_parts("what is the deadline") == (True, True)


def test_bad_ensembles_are_refused() -> None:
    multi, english = _parts()
    with pytest.raises(ConfigError, match="at least two"):
        EnsembleEmbedder([(multi, 1.0)])
    with pytest.raises(ConfigError, match="positive"):
        EnsembleEmbedder([(multi, 1.0), (english, 0.0)])
    with pytest.raises(ConfigError, match="same models"):
        EnsembleEmbedder([(multi, 1.0), (english, 1.0)]).with_parts([english, multi])


def test_the_cache_keeps_each_part_under_its_own_model(tmp_path: Path) -> None:
    multi, english = _parts()
    path = tmp_path / "cache.sqlite"
    cached = CachedEmbedder(EnsembleEmbedder([(multi, 1.0), (english, 1.0)]), path=path)
    first = cached.embed_documents(["a", "b"])
    again = cached.embed_documents(["a", "b", "c"])
    assert np.allclose(first, again[:2]) and (cached.stats.hits, cached.stats.embedded) == (2, 3)
    assert multi.passages_embedded == 3 and english.passages_embedded == 3
    assert len(cached) == 3
    cached.close()
    alone = CachedEmbedder(FakeEmbedder(dimension=16, model="multi"), path=path)
    alone.embed_documents(["a", "b", "c"])
    assert (alone.stats.hits, alone.stats.embedded) == (3, 0)  # the part's vectors serve it alone too
    alone.close()


def test_a_collection_records_the_ensemble_and_refuses_one_part_alone(tmp_path: Path) -> None:
    multi, english = _parts()
    db = str(tmp_path / "p.db")
    with Plait(db, embedder=EnsembleEmbedder([(multi, 1.0), (english, 1.0)])) as engine:
        engine.index_documents(documents({"a": "the deadline is Friday", "b": "pasta recipes"}))
        assert engine.search("deadline", k=1).hits[0].metadata["docId"] == "a"
        assert engine.store.get_collection("default").embedder_model == "multi@0.5+english@0.5"  # type: ignore[union-attr]
    with Plait(db, embedder=FakeEmbedder(dimension=16, model="multi")) as engine, pytest.raises(ModelMismatchError):
        engine.index_documents(documents({"c": "more text"}))


def test_the_registered_pair_is_e5_and_minilm_with_equal_weights() -> None:
    duo = make_embedder("e5-minilm")
    assert isinstance(duo, E5MiniLMEmbedder) and registry_name(duo) == "e5-minilm"
    assert duo.model == "multilingual-e5-small@0.5+all-MiniLM-L6-v2@0.5" and duo.dimension == 768
    assert duo.provider == "local" and duo.languages is not None and {"en", "pt"} <= duo.languages


@pytest.mark.slow
def test_real_models_give_the_mean_of_their_cosines() -> None:
    duo = E5MiniLMEmbedder(threads=1)
    e5, minilm = duo.parts
    query, passage = "how do I roll back a bad release", "Redeploy the previous image tag to undo a deployment."
    got = float(duo.embed_documents([passage])[0] @ duo.embed_query(query))
    expected = 0.5 * float(e5.embed_documents([passage])[0] @ e5.embed_query(query)) + 0.5 * float(
        minilm.embed_documents([passage])[0] @ minilm.embed_query(query))
    assert got == pytest.approx(expected, abs=1e-5)


def test_cache_stats_count_a_text_embedded_when_any_part_lacked_it(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    multi, english = _parts()
    alone = CachedEmbedder(multi, path=path)
    alone.embed_documents(["a", "b"])  # the multilingual part's vectors are cached already
    alone.close()
    cached = CachedEmbedder(EnsembleEmbedder([(multi, 1.0), (english, 1.0)]), path=path)
    cached.embed_documents(["a", "b", "c"])
    assert (cached.stats.hits, cached.stats.embedded) == (0, 3)  # English embedded all three
    cached.embed_documents(["a", "c"])
    assert (cached.stats.hits, cached.stats.embedded) == (2, 3)
    cached.close()


class _Local(FakeEmbedder):
    provider = "local"
    loads = 0

    def load(self) -> None:
        type(self).loads += 1


def test_through_the_cache_the_pair_keeps_its_name_and_loads_its_models() -> None:
    cached = CachedEmbedder(E5MiniLMEmbedder(), path=":memory:")
    assert registry_name(cached) == "e5-minilm"  # a collection indexed through the cache records it
    cached.close()
    from plait.embeddings.base import load_local

    parts = [_Local(dimension=4, model="x"), _Local(dimension=4, model="y")]
    duo = CachedEmbedder(EnsembleEmbedder([(parts[0], 1.0), (parts[1], 1.0)]), path=":memory:")
    load_local(duo)
    assert _Local.loads == 2
    duo.close()
