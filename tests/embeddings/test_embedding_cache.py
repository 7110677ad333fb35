"""CachedEmbedder: passages keyed by (provider, model, sha256(text)), queries pass through."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plait.embeddings.cache import CachedEmbedder, cache_path, text_key
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError


def test_misses_are_embedded_once_and_hits_are_identical(tmp_path: Path) -> None:
    inner = FakeEmbedder()
    cached = CachedEmbedder(inner, path=tmp_path)
    first = cached.embed_documents(["alpha", "beta", "alpha"])
    assert inner.texts_embedded == 2 and inner.calls == 1  # the repeat is embedded once
    again = cached.embed_documents(["beta", "gamma", "alpha"])
    assert inner.texts_embedded == 3  # only gamma is new
    # hits: beta and alpha of the second call (a repeat within one call is not a hit)
    assert (cached.stats.hits, cached.stats.embedded) == (2, 3)
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[2], first[0])
    np.testing.assert_allclose(
        again, FakeEmbedder().embed_documents(["beta", "gamma", "alpha"])
    )
    assert again.dtype == np.float32 and len(cached) == 3
    cached.close()


def test_the_cache_survives_the_process_and_is_keyed_by_model(tmp_path: Path) -> None:
    CachedEmbedder(FakeEmbedder(), path=tmp_path).embed_documents(["alpha", "beta"])
    inner = FakeEmbedder()
    reopened = CachedEmbedder(inner, path=tmp_path)
    assert reopened.dimension == 64
    reopened.embed_documents(["alpha", "beta"])
    assert inner.texts_embedded == 0 and reopened.stats.hits == 2
    other = FakeEmbedder(model="hash-64-other")
    CachedEmbedder(other, path=tmp_path).embed_documents(["alpha"])
    assert other.texts_embedded == 1  # another model never reads these vectors
    assert (tmp_path / "embeddings.sqlite").is_file()


def test_queries_go_through_to_the_wrapped_embedder(tmp_path: Path) -> None:
    inner = FakeEmbedder()
    cached = CachedEmbedder(inner, path=tmp_path)
    vector = cached.embed_query("what does ERR-4012 mean")
    assert inner.calls == 1 and len(cached) == 0
    np.testing.assert_allclose(
        vector, FakeEmbedder().embed_query("what does ERR-4012 mean")
    )
    assert (cached.provider, cached.model) == ("fake", "hash-64")


def test_paths_and_keys() -> None:
    assert (
        text_key("a")
        == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    )
    assert cache_path(None).name == "embeddings.sqlite"
    assert cache_path("/tmp/somewhere") == Path("/tmp/somewhere/embeddings.sqlite")
    assert cache_path("/tmp/x/mine.sqlite") == Path("/tmp/x/mine.sqlite")
    with pytest.raises(ConfigError, match="already cached"):
        CachedEmbedder(CachedEmbedder(FakeEmbedder(), path=":memory:"))
