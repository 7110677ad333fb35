"""make_embedder: names, environment options, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plait.embeddings import (
    DEFAULT_EMBEDDER,
    EMBEDDER_NAMES,
    E5Embedder,
    Embedder,
    FakeEmbedder,
    MiniLMEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    embedder_languages,
    make_embedder,
)
from plait.embeddings import local as local_module
from plait.errors import ConfigError
from plait.testing.wire import WireServer

ENV_VARS = (
    "PLAIT_OLLAMA_URL",
    "PLAIT_OLLAMA_MODEL",
    "PLAIT_OPENAI_URL",
    "PLAIT_OPENAI_MODEL",
    "PLAIT_OPENAI_API_KEY",
    "OPENAI_API_KEY",
    "PLAIT_EMBED_TIMEOUT",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def test_names_and_default() -> None:
    assert set(EMBEDDER_NAMES) == {"e5-minilm", "minilm", "e5", "ollama", "openai", "none", "fake"}
    assert DEFAULT_EMBEDDER in EMBEDDER_NAMES
    assert DEFAULT_EMBEDDER == "e5-minilm"
    assert isinstance(make_embedder(DEFAULT_EMBEDDER), Embedder)


def test_none_means_no_dense_arm() -> None:
    assert make_embedder("none") is None
    with pytest.raises(ConfigError):
        make_embedder("none", model="x")


def test_unknown_name_lists_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as info:
        make_embedder("bert")
    for name in EMBEDDER_NAMES:
        assert name in str(info.value)


def test_each_name_builds_its_class_without_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("a model was loaded by the factory")

    monkeypatch.setattr(local_module, "_load_e5", refuse)
    monkeypatch.setattr(local_module, "_load_minilm", refuse)
    monkeypatch.setattr(local_module, "_MODELS", {})
    assert isinstance(make_embedder("E5"), E5Embedder)
    assert isinstance(make_embedder(" minilm "), MiniLMEmbedder)
    assert isinstance(make_embedder("ollama"), OllamaEmbedder)
    assert isinstance(make_embedder("openai", api_key="k"), OpenAIEmbedder)
    fake = make_embedder("fake", dimension=8)
    assert isinstance(fake, FakeEmbedder) and fake.dimension == 8


def test_ollama_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    default = make_embedder("ollama")
    assert isinstance(default, OllamaEmbedder)
    assert (default.base_url, default.model, default.timeout) == (
        "http://127.0.0.1:11434",
        "nomic-embed-text",
        30.0,
    )
    monkeypatch.setenv("PLAIT_OLLAMA_URL", "http://127.0.0.1:9999/")
    monkeypatch.setenv("PLAIT_OLLAMA_MODEL", "mxbai-embed-large")
    monkeypatch.setenv("PLAIT_EMBED_TIMEOUT", "2.5")
    configured = make_embedder("ollama")
    assert isinstance(configured, OllamaEmbedder)
    assert (configured.base_url, configured.model, configured.timeout) == (
        "http://127.0.0.1:9999",
        "mxbai-embed-large",
        2.5,
    )
    explicit = make_embedder("ollama", model="all-minilm", timeout=1.0)
    assert isinstance(explicit, OllamaEmbedder)
    assert (explicit.model, explicit.timeout) == ("all-minilm", 1.0)


def test_remote_embedders_declare_languages_from_options_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert embedder_languages(make_embedder("ollama")) is None  # undeclared: unknown
    monkeypatch.setenv("PLAIT_EMBED_LANGUAGES", "en, PT")
    assert embedder_languages(make_embedder("ollama")) == frozenset({"en", "pt"})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert embedder_languages(make_embedder("openai")) == frozenset({"en", "pt"})
    assert embedder_languages(make_embedder("openai", languages=["de"])) == frozenset({"de"})
    assert embedder_languages(make_embedder("minilm")) == frozenset({"en"})  # the env is for remote models
    with pytest.raises(ConfigError, match="ISO 639-1"):
        make_embedder("ollama", languages="english; portuguese")


def test_openai_needs_a_key_only_for_openai_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_embedder("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-generic")
    embedder = make_embedder("openai")
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.url == "https://api.openai.com/v1/embeddings"
    assert embedder._headers["Authorization"] == "Bearer sk-generic"
    monkeypatch.setenv("PLAIT_OPENAI_API_KEY", "sk-plait")
    embedder = make_embedder("openai")
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder._headers["Authorization"] == "Bearer sk-plait"
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("PLAIT_OPENAI_API_KEY")
    monkeypatch.setenv("PLAIT_OPENAI_URL", "http://127.0.0.1:8000/v1")
    local = make_embedder("openai")
    assert isinstance(local, OpenAIEmbedder)
    assert local.url == "http://127.0.0.1:8000/v1/embeddings"


def test_openai_from_environment_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    with WireServer(dimension=12) as srv:
        monkeypatch.setenv("PLAIT_OPENAI_URL", srv.url)
        monkeypatch.setenv("PLAIT_OPENAI_MODEL", "nomic-embed")
        embedder = make_embedder("openai")
        assert embedder is not None
        vector = embedder.embed_query("hello")
        assert vector.shape == (12,)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        assert srv.requests[0].body["model"] == "nomic-embed"


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_bad_timeout_in_environment(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PLAIT_EMBED_TIMEOUT", value)
    with pytest.raises(ConfigError, match="PLAIT_EMBED_TIMEOUT"):
        make_embedder("ollama")


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad option"):
        make_embedder("ollama", colour="blue")
    with pytest.raises(ConfigError):
        make_embedder("e5", variant="klingon")


def test_registry_name_rebuilds_the_embedder_object() -> None:
    from plait.embeddings import E5Embedder, FakeEmbedder, MiniLMEmbedder, registry_name
    from plait.embeddings.cache import CachedEmbedder

    assert registry_name(E5Embedder()) == "e5"  # its provider is "local": not a name
    assert registry_name(CachedEmbedder(MiniLMEmbedder(), path=":memory:")) == "minilm"
    assert registry_name(FakeEmbedder()) == "fake"

    class Custom(FakeEmbedder):
        provider = "local"

    assert registry_name(Custom()) is None


def test_an_embedder_object_is_recorded_by_a_name_that_rebuilds_it(tmp_path: Path) -> None:
    """Regression: a store indexed with an Embedder object recorded its provider
    ('local' for e5), and a later Plait(store) failed with "unknown embedder 'local'"."""
    from plait.embeddings import FakeEmbedder
    from plait.errors import ModelMismatchError
    from plait.service import Plait
    from plait.testing.corpus import ARTICLE_DOCS, documents

    class Custom(FakeEmbedder):
        provider = "local"

    store = str(tmp_path / "p.db")
    with Plait(store, embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="named")
        assert engine.store.get_settings("named").get("embedder") == "fake"
    with Plait(store, embedder=Custom(model="custom-m")) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="custom")
        assert "embedder" not in engine.store.get_settings("custom")
    with Plait(store) as engine:
        assert engine.search("ERR-4012", collection="named").hits  # rebuilt as "fake"
        with pytest.raises(ModelMismatchError, match="custom-m"):
            engine.search("ERR-4012", collection="custom")  # not "unknown embedder 'local'"
