"""Chat providers (LLMs) for listwise rerank, ask and the Knowledge Refinery.

==========  ==========================  =======================================
name        class                       talks to
==========  ==========================  =======================================
``ollama``  :class:`OllamaLLM`          ``POST {PLAIT_OLLAMA_URL}/api/chat``
``openai``  :class:`OpenAILLM`          ``POST {PLAIT_OPENAI_URL}/v1/chat/completions``
``none``    no LLM                      nothing
==========  ==========================  =======================================

:func:`make_llm` builds one by name, filling missing options from the environment:

=======================  ============================================================
``PLAIT_LLM``            the provider when no name is given (default ``none``)
``PLAIT_LLM_MODEL``      the chat model (default ``llama3.2`` / ``gpt-4o-mini``)
``PLAIT_OLLAMA_URL``     Ollama's address (default ``http://127.0.0.1:11434``)
``PLAIT_OPENAI_URL``     the OpenAI-compatible address (default ``https://api.openai.com``)
``PLAIT_OPENAI_API_KEY`` the API key (``OPENAI_API_KEY`` is read too)
``PLAIT_LLM_TIMEOUT``    seconds per attempt (default 60)
=======================  ============================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from plait.config import Settings
from plait.errors import ConfigError
from plait.llm.base import LLM, HTTPChatLLM, check_messages
from plait.llm.ollama import DEFAULT_OLLAMA_CHAT_MODEL, DEFAULT_OLLAMA_URL, OllamaLLM
from plait.llm.openai import DEFAULT_OPENAI_CHAT_MODEL, DEFAULT_OPENAI_URL, OpenAILLM

__all__ = [
    "DEFAULT_OLLAMA_CHAT_MODEL",
    "DEFAULT_OLLAMA_URL",
    "DEFAULT_OPENAI_CHAT_MODEL",
    "DEFAULT_OPENAI_URL",
    "LLM",
    "LLM_NAMES",
    "HTTPChatLLM",
    "OllamaLLM",
    "OpenAILLM",
    "check_messages",
    "make_llm",
]

#: Every name :func:`make_llm` accepts.
LLM_NAMES: tuple[str, ...] = ("none", "ollama", "openai")

_BUILDERS: dict[str, Callable[..., LLM]] = {"ollama": OllamaLLM, "openai": OpenAILLM}


def _env_options(name: str, settings: Settings) -> dict[str, Any]:
    """Options for ``name`` taken from the settings' environment (explicit options win)."""
    found: dict[str, Any] = {}
    if settings.llm_model:
        found["model"] = settings.llm_model
    if settings.llm_timeout is not None:
        found["timeout"] = settings.llm_timeout
    if name == "ollama" and settings.ollama_url:
        found["base_url"] = settings.ollama_url
    elif name == "openai":
        found["base_url"] = settings.openai_url or DEFAULT_OPENAI_URL
        key = settings.secret("openai_api_key")
        if key:
            found["api_key"] = key
    return found


def make_llm(name: str | None = None, **options: Any) -> LLM | None:
    """Build the chat provider called ``name`` (one of :data:`LLM_NAMES`).

    ``name`` None reads ``PLAIT_LLM`` (unset means ``none``). ``"none"`` returns None.
    Options go to the class (``base_url``, ``model``, ``timeout``, ``retries``,
    ``backoff``, and ``api_key`` for openai); missing ones come from the environment
    (see the module docstring). Nothing is contacted here.

    Raises :class:`~plait.errors.ConfigError` for an unknown name, an option the
    provider does not take, a bad value, or the real OpenAI API without a key.
    """
    settings = Settings.resolve()
    chosen = name if name is not None else (settings.llm or "none")
    key = chosen.strip().lower()
    if key not in LLM_NAMES:
        raise ConfigError(f"unknown LLM {chosen!r}; allowed: {', '.join(LLM_NAMES)}")
    if key == "none":
        return None
    merged = {**_env_options(key, settings), **options}
    if key == "openai" and not merged.get("api_key"):
        host = urlparse(str(merged.get("base_url", ""))).hostname or ""
        if host == "api.openai.com" or host.endswith(".openai.com"):
            raise ConfigError(
                "the openai LLM needs an API key for api.openai.com: set OPENAI_API_KEY "
                "(or PLAIT_OPENAI_API_KEY), or point PLAIT_OPENAI_URL at an "
                "OpenAI-compatible server that needs none"
            )
    try:
        return _BUILDERS[key](**merged)
    except TypeError as exc:
        raise ConfigError(f"bad option for LLM {key!r}: {exc}") from exc
