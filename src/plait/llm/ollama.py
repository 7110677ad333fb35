"""Ollama's ``POST /api/chat`` (non-streaming).

Request: ``{"model", "messages", "stream": false, "options": {"temperature",
"num_predict"}}``; answer: ``{"message": {"role": "assistant", "content": ...},
"done": true, ...}``. An ``{"error": ...}`` body (an unknown model, say) becomes a
:class:`~plait.errors.ProviderResponseError` quoting it.
"""

from __future__ import annotations

from typing import Any

from plait._http import excerpt
from plait.llm.base import HTTPChatLLM

__all__ = ["DEFAULT_OLLAMA_CHAT_MODEL", "DEFAULT_OLLAMA_URL", "OllamaLLM"]

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_CHAT_MODEL = "llama3.2"


class OllamaLLM(HTTPChatLLM):
    """A chat model served by Ollama."""

    provider = "ollama"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_OLLAMA_URL,
        model: str = DEFAULT_OLLAMA_CHAT_MODEL,
        timeout: float = 60.0,
        retries: int = 1,
        backoff: float = 0.5,
    ) -> None:
        """Point at an Ollama server; nothing is contacted until the first chat."""
        super().__init__(
            base_url=base_url, model=model, timeout=timeout, retries=retries, backoff=backoff
        )

    def _endpoint(self) -> str:
        return f"{self.base_url}/api/chat"

    def _payload(
        self, messages: list[dict[str, Any]], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": temperature}
        if max_tokens is not None:
            options["num_predict"] = max_tokens
        return {"model": self.model, "messages": messages, "stream": False, "options": options}

    def _parse(self, answer: Any) -> str:
        if not isinstance(answer, dict):
            raise self._bad(f"returned {type(answer).__name__} where an object was expected")
        if "error" in answer and "message" not in answer:
            raise self._bad(f"returned an error: {excerpt(str(answer['error']))}")
        message = answer.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise self._bad(f"answer has no 'message.content' string: {excerpt(repr(answer), 120)}")
        return str(message["content"])
